#!/usr/bin/env python3
"""Checks recorded HTTP answers against doc/openapi.yaml.

Usage: openapi_check.py OPENAPI RECORDS
RECORDS: one JSON object a line, {"method", "path", "status", "type", "body"}
(body: the text), as t/integration/4001-http.sh records every call.
Fails (exit 1, one line each) when an answer's path, method or status is not
documented, or its JSON body breaks the schema; and when a documented path
and method was never called (an untested part of the API).
"""
import json
import re
import sys

import yaml


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def check(doc, schema, value, where):
    """A list of what breaks `schema` (the JSON Schema subset openapi.yaml uses)."""
    schema = deref(doc, schema)
    errors = []
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not check(doc, s, value, where)]
        return [] if len(matches) == 1 else [f"{where}: matches {len(matches)} of oneOf"]
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{where}: expected an integer, got {value!r}"]
    elif kind == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return [f"{where}: expected a number, got {value!r}"]
    elif kind in types and not isinstance(value, types[kind]):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errors.append(f"{where}: {value} under {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: no '{key}'")
        props = schema.get("properties", {})
        for key, v in value.items():
            if key in props:
                errors += check(doc, props[key], v, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected '{key}'")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += check(doc, schema["additionalProperties"], v, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errors += check(doc, schema["items"], v, f"{where}[{i}]")
    return errors


def template_of(doc, path):
    base = doc["servers"][0]["url"]
    if not path.startswith(base + "/"):
        return None
    rest = path[len(base):]
    for template in doc["paths"]:
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, rest):
            return template
    return None


def main():
    doc = yaml.safe_load(open(sys.argv[1]))
    failures, called = [], set()
    for line in open(sys.argv[2]):
        r = json.loads(line)
        path = r["path"].split("?")[0]
        template = template_of(doc, path)
        what = f"{r['method']} {r['path']} -> {r['status']}"
        if template is None:
            if r["status"] == 404:
                continue  # an unknown path, refused as the spec says
            failures.append(f"{what}: path not in the OpenAPI file")
            continue
        op = doc["paths"][template].get(r["method"].lower())
        if op is None:
            if r["status"] != 405:
                failures.append(f"{what}: method not in the OpenAPI file")
            continue
        called.add((template, r["method"].lower()))
        # "default": the errors any operation may give (http.md §3).
        response = op["responses"].get(str(r["status"]), op["responses"].get("default"))
        if response is None:
            failures.append(f"{what}: status not in the OpenAPI file")
            continue
        response = deref(doc, response)
        content = response.get("content", {})
        media = r["type"].split(";")[0].strip()
        if media not in content:
            failures.append(f"{what}: content type {media} not in the OpenAPI file")
            continue
        if media == "application/json":
            try:
                body = json.loads(r["body"])
            except ValueError:
                failures.append(f"{what}: not JSON")
                continue
            failures += [f"{what}: {e}" for e in check(doc, content[media]["schema"], body, "body")]
    for template, ops in doc["paths"].items():
        for method in ops:
            if method in ("get", "post") and (template, method) not in called:
                failures.append(f"{method.upper()} {template}: documented but never called")
    for f in failures:
        print(f)
    print(f"openapi_check: {len(failures)} problems")
    sys.exit(1 if failures else 0)


main()
