// The services every broker provides (doc/spec/overlay.md section 10):
// broker.* (ping, info, ready, dmesg, shutdown, multicast), event.*
// (publish, subscribe, unsubscribe) and overlay.status.
#pragma once

namespace banyan {

class Broker;

void register_builtin_services(Broker& broker);

}  // namespace banyan
