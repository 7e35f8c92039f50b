/* The embedded server's C interface: what libremex_embedded.so exports, so that the
 * front ends (the remex CLI, the shell, the Python module) start a device server in
 * their own process without linking the server, the device layer or CUDA. They load the
 * library with dlopen when a command runs without --server or --farm
 * (host_client/tooling/embedded_server.h) and speak to it over loopback, through the
 * same protocol as to a remote remex-server.
 *
 * Plain C, no Remex header: the two sides agree on these declarations and on
 * REMEX_EMBEDDED_ABI_VERSION, checked first. A status code is base/status.h's
 * StatusCode as an int (0: OK).
 */
#ifndef REMEX_DEVICE_SERVER_EMBEDDED_ABI_H_
#define REMEX_DEVICE_SERVER_EMBEDDED_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a declaration below changes meaning. */
#define REMEX_EMBEDDED_ABI_VERSION 1

typedef struct remex_embedded_server remex_embedded_server;

/* REMEX_EMBEDDED_ABI_VERSION as the library was built. */
int remex_embedded_abi_version(void);

/* Remex's version as the library was built ("0.9.0"): a static string. */
const char* remex_embedded_remex_version(void);

/* Starts a device server on the CPU device, listening on 127.0.0.1 at a port the
 * system picks, with no token and no TLS (loopback only), and stores it in *out.
 *   compute_threads  the CPU device's compute threads (remex-server --threads); 0: its
 *                    default.
 *   log_level        the least severe message it logs to stderr, on spdlog's scale
 *                    (0 trace, 1 debug, 2 info, 3 warn, 4 error, 5 critical, 6 off).
 * Returns 0 (OK), or the status code of why it could not start with the message,
 * NUL-terminated and cut to error_size bytes, in `error` (*out is then NULL). */
int remex_embedded_start(int compute_threads, int log_level, remex_embedded_server** out, char* error,
                         size_t error_size);

/* The port it listens on. */
uint16_t remex_embedded_port(const remex_embedded_server* server);

/* Stops it: closes every session, waits for their requests to end and frees all it
 * holds. NULL is a no-op. */
void remex_embedded_stop(remex_embedded_server* server);

#ifdef __cplusplus
}
#endif

#endif /* REMEX_DEVICE_SERVER_EMBEDDED_ABI_H_ */
