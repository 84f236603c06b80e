// The client's end of an interactive session (`trainq shell`; docs/architecture.md,
// "Interactive sessions"): connects to the shim's session socket and joins the user's
// terminal to the program, as ssh does.
#pragma once

#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

// Connects to `socket` (a session socket the daemon named): a shim that has not bound it yet
// is waited for up to `patience_ms`. The server must run as root or as this user.
Result<int> ConnectSession(const std::string& socket, int patience_ms);

// Relays the session on `fd` (closed at the end; `early`: bytes already read from it) until
// the program ends: stdin in raw mode
// when it is a terminal (restored however this ends), its size at the start and on every
// SIGWINCH; trainq's notices on stderr. Returns the program's exit status (128 + a signal), or
// 255 with the reason on stderr when the connection ended first. SIGTERM and SIGHUP end the
// relay (the session is hung up) with 128 + the signal.
int RelaySession(int fd, std::string_view early = "");

}  // namespace trainq
