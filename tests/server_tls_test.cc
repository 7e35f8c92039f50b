// TLS on the transport (remex-server --tls-cert/--tls-key [--tls-client-ca], clients
// --tls-ca [--tls-cert --tls-key]), tested against a real server process on loopback
// with the test PKI of tests/data/tls (make-certs.sh there): a verified server, a
// plaintext client, an untrusted CA, a certificate for another host, a TLS client
// against a plaintext server, mutual TLS with and without a client certificate, TLS
// with a token, unusable files, and the refusal to serve a non-loopback address with
// TLS alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "host_client/client/client.h"
#include "tests/model_util.h"
#include "tests/process_util.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::Compile;
using remex::testing::ExpectServesAddRelu;
using remex::testing::RunCommand;
using remex::testing::ServerProcess;

std::string Pki(const std::string& name) { return remex::testing::BuiltPath(REMEX_TLS_DIR_BUILT) + "/" + name; }

std::vector<std::string> TlsServerArgs(const std::string& cert = "server") {
  return {"--tls-cert", Pki(cert + ".pem"), "--tls-key", Pki(cert + ".key")};
}

StatusOr<std::unique_ptr<Session>> Connect(uint16_t port, std::optional<rpc::TlsClientConfig> tls,
                                           const std::string& host = "127.0.0.1") {
  client::ConnectOptions options;
  options.timeout = std::chrono::seconds(20);
  options.tls = std::move(tls);
  return Session::Connect(host, port, options);
}

rpc::TlsClientConfig TrustingTestCa() { return {Pki("ca.pem"), "", "", ""}; }

TEST(TlsTest, AVerifiedServerServesOverTls) {
  ServerProcess server(TlsServerArgs());
  ASSERT_NE(server.port(), 0);
  auto session = Connect(server.port(), TrustingTestCa());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectServesAddRelu(**session);
  // By its DNS name as well as by address (the certificate names both): connected by
  // address, verified against the name, as when a tunnel or raw IP leads to a server.
  rpc::TlsClientConfig by_name_tls = TrustingTestCa();
  by_name_tls.server_name = "localhost";
  auto by_name = Connect(server.port(), by_name_tls);
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  ExpectServesAddRelu(**by_name);
  by_name_tls.server_name = "elsewhere.example";  // a name the certificate does not carry
  auto wrong_name = Connect(server.port(), by_name_tls);
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.status().message().find("mismatch"), std::string::npos) << wrong_name.status().ToString();
}

// 48 MiB each way: many TLS records, compressed and raw chunks, and a reply larger than
// the socket buffers.
TEST(TlsTest, LargeTensorsCrossTlsIntact) {
  ServerProcess server(TlsServerArgs());
  ASSERT_NE(server.port(), 0);
  auto session = Connect(server.port(), TrustingTestCa());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  // Half the tensor compresses (a ramp), half does not (noise).
  std::vector<float> values = testing::RandomFloats(12u << 20, 12345);
  for (size_t i = 0; i < values.size() / 2; ++i) values[i] = static_cast<float>(i % 1000);
  auto x = (*session)->Upload(testing::Floats({static_cast<int64_t>(values.size())}, values));
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  auto back = (*session)->Download(x->handle);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(testing::ToFloats(*back) == values);
}

TEST(TlsTest, APlaintextClientIsToldTheServerSpeaksTls) {
  ServerProcess server(TlsServerArgs());
  ASSERT_NE(server.port(), 0);
  auto plain = Connect(server.port(), std::nullopt);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kFailedPrecondition) << plain.status().ToString();
  EXPECT_NE(plain.status().message().find("accepts TLS connections only"), std::string::npos)
      << plain.status().ToString();
  auto session = Connect(server.port(), TrustingTestCa());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectServesAddRelu(**session);
}

TEST(TlsTest, AServerCertificateFromAnotherCaIsRefused) {
  ServerProcess server(TlsServerArgs());
  ASSERT_NE(server.port(), 0);
  auto session = Connect(server.port(), rpc::TlsClientConfig{Pki("other-ca.pem"), "", "", ""});
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(session.status().message().find("certificate verify failed"), std::string::npos)
      << session.status().ToString();
}

TEST(TlsTest, ACertificateForAnotherHostIsRefused) {
  ServerProcess server(TlsServerArgs("wrong-name"));
  ASSERT_NE(server.port(), 0);
  auto session = Connect(server.port(), TrustingTestCa());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(session.status().message().find("mismatch"), std::string::npos) << session.status().ToString();
}

TEST(TlsTest, ATlsClientIsToldAPlaintextServerDoesNotSpeakTls) {
  ServerProcess server;
  ASSERT_NE(server.port(), 0);
  auto session = Connect(server.port(), TrustingTestCa());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(session.status().message().find("TLS handshake"), std::string::npos) << session.status().ToString();
  auto plain = Connect(server.port(), std::nullopt);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ExpectServesAddRelu(**plain);
}

TEST(TlsTest, MutualTlsServesOnlyClientsWithACertificateOfItsCa) {
  std::vector<std::string> args = TlsServerArgs();
  args.insert(args.end(), {"--tls-client-ca", Pki("ca.pem")});
  ServerProcess server(args);
  ASSERT_NE(server.port(), 0);
  // Without a client certificate: refused, at the handshake or (TLS 1.3, where the
  // server checks the client after the client's handshake is done) at the first request.
  auto anonymous = Connect(server.port(), TrustingTestCa());
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), StatusCode::kUnavailable) << anonymous.status().ToString();
  // The server's own certificate is not a client certificate (extendedKeyUsage serverAuth).
  auto server_cert = Connect(server.port(), rpc::TlsClientConfig{Pki("ca.pem"), Pki("server.pem"), Pki("server.key"), ""});
  ASSERT_FALSE(server_cert.ok());
  auto session = Connect(server.port(), rpc::TlsClientConfig{Pki("ca.pem"), Pki("client.pem"), Pki("client.key"), ""});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectServesAddRelu(**session);
}

TEST(TlsTest, ATokenIsProvenOverTls) {
  std::string token_file = (std::filesystem::temp_directory_path() / ("remex_tls_" + std::to_string(::getpid()))).string();
  std::ofstream(token_file) << "tls-and-token-0123456789abcdef\n";
  std::vector<std::string> args = TlsServerArgs();
  args.insert(args.end(), {"--token-file", token_file});
  ServerProcess server(args);
  ASSERT_NE(server.port(), 0);
  client::ConnectOptions options;
  options.tls = TrustingTestCa();
  auto no_token = Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_FALSE(no_token.ok());
  EXPECT_EQ(no_token.status().code(), StatusCode::kPermissionDenied) << no_token.status().ToString();
  options.token = "tls-and-token-0123456789abcdef";
  auto session = Session::Connect("127.0.0.1", server.port(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ExpectServesAddRelu(**session);
  std::filesystem::remove(token_file);
}

TEST(TlsTest, UnusableFilesAreNamed) {
  const std::string server = REMEX_SERVER_BIN;
  auto missing = RunCommand(server + " --listen 127.0.0.1:0 --quiet --tls-cert /nonexistent.pem --tls-key " +
                            Pki("server.key") + " 2>&1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent.pem"), std::string::npos) << missing.output;
  auto mismatched = RunCommand(server + " --listen 127.0.0.1:0 --quiet --tls-cert " + Pki("server.pem") +
                               " --tls-key " + Pki("client.key") + " 2>&1");
  EXPECT_EQ(mismatched.exit_code, 1);
  EXPECT_NE(mismatched.output.find("cannot be used with certificate"), std::string::npos) << mismatched.output;
  auto alone = RunCommand(server + " --listen 127.0.0.1:0 --quiet --tls-cert " + Pki("server.pem") + " 2>&1");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.output.find("--tls-cert and --tls-key go together"), std::string::npos) << alone.output;
  auto client = Connect(1, rpc::TlsClientConfig{"/nonexistent-ca.pem", "", "", ""});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("/nonexistent-ca.pem"), std::string::npos) << client.status().ToString();
}

TEST(TlsTest, ANonLoopbackAddressNeedsATokenOrMutualTls) {
  const std::string server = std::string(REMEX_SERVER_BIN) + " --listen 0.0.0.0:0 --quiet --tls-cert " +
                             Pki("server.pem") + " --tls-key " + Pki("server.key");
  auto refused = RunCommand(server + " 2>&1");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("refusing to serve 0.0.0.0 without authentication"), std::string::npos)
      << refused.output;
  auto mutual = RunCommand("timeout -s TERM 2 " + server + " --tls-client-ca " + Pki("ca.pem"));
  EXPECT_NE(mutual.output.find("remex-server listening on 0.0.0.0:"), std::string::npos) << mutual.output;
}

TEST(TlsTest, TheCliRunsAModelOverTls) {
  ServerProcess server(TlsServerArgs());
  ASSERT_NE(server.port(), 0);
  std::string rmx = (std::filesystem::temp_directory_path() / ("remex_tls_" + std::to_string(::getpid()) + ".rmx")).string();
  std::vector<std::byte> bytes = Compile(AddReluModel());
  std::ofstream(rmx, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  auto run = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --shape x=2x4 --server " + address +
                        " --tls-ca " + Pki("ca.pem") + " --json 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"outputs\""), std::string::npos) << run.output;
  auto plain = RunCommand(std::string(REMEX_CLI_BIN) + " run " + rmx + " --shape x=2x4 --server " + address + " 2>&1");
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.output.find("accepts TLS connections only"), std::string::npos) << plain.output;
  std::filesystem::remove(rmx);
}

}  // namespace
}  // namespace remex
