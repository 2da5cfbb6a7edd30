// TempDir: a fresh directory under the system's temporary one for a unit
// test, removed with what it holds when the test ends.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <stdlib.h>

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "banyan-unit-XXXXXX").string();
        REQUIRE(mkdtemp(tmpl.data()));
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};
