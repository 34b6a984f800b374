// bbreplay's worker protocol: the worker's notes of whose code runs ("@native", "@kernel") are kept
// apart from its reply, so that a death is charged to the side that was running.
#include <chrono>
#include <csignal>
#include <cstdlib>

#include "catch.h"
#include "replay/workers/worker_pool.h"

using bb::replay::Worker;

namespace {

// A worker that reads the token first (as bbreplay --worker does) and has it in $t.
Worker shell(const std::string& script) { return Worker({"/bin/sh", "-c", "read t; " + script}); }

}  // namespace

TEST_CASE("notes before a reply are not the reply; the last one is kept") {
  Worker w =
      shell("read q; echo \"@$t native\"; echo \"@$t kernel\"; echo \"$t answer $q\"; read q; echo \"$t plain\"");
  std::string reply, why;
  REQUIRE(w.ask("1 traced", 20, &reply, &why) == Worker::Outcome::Reply);
  CHECK(reply == "answer 1 traced");
  CHECK(w.last_note() == "kernel");
  REQUIRE(w.ask("2 traced", 20, &reply, &why) == Worker::Outcome::Reply);
  CHECK(reply == "plain");
  CHECK(w.last_note().empty());  // (notes belong to one request)
}

TEST_CASE("a worker that dies after a note is known to have died there") {
  Worker w = shell("read q; echo \"@$t kernel\"; echo \"@$t native\"; kill -SEGV $$");
  std::string reply, why;
  REQUIRE(w.ask("0 traced", 20, &reply, &why) == Worker::Outcome::Died);
  CHECK(w.last_note() == "native");
  CHECK(why.find("SEGV") != std::string::npos);
}

TEST_CASE("a worker that closes its result pipe and lives on is killed, not waited for forever") {
  Worker w = shell("read q; exec 1>&-; sleep 600");
  std::string reply, why;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(w.ask("0 traced", 60, &reply, &why) == Worker::Outcome::Died);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));  // 5 s grace, not the 600 s sleep
  CHECK(why.find("killed") != std::string::npos);
}

TEST_CASE("a stop request ends the wait and the worker") {
  Worker w = shell("read q; sleep 600");
  std::string reply, why;
  volatile std::sig_atomic_t stop = 1;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(w.ask("0 traced", 60, &reply, &why, &stop) == Worker::Outcome::Interrupted);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("lines without the worker's token are not the worker's: no forged result, no forged note") {
  // what a kernel writing to the descriptors it finds could send: a note charging its crash to
  // native, a result that says it passed
  Worker w = shell(
      "read q; echo \"@$t kernel\"; echo @native; echo '{\"status\": \"passed\"}'; "
      "echo \"@x$t native\"; kill -SEGV $$");
  std::string reply, why;
  REQUIRE(w.ask("0 traced", 20, &reply, &why) == Worker::Outcome::Died);
  CHECK(w.last_note() == "kernel");
  CHECK(reply.empty());
}

TEST_CASE("a request's clock starts when a new worker says it is ready, not when it was started") {
  std::string reply, why;
  Worker slow_start = shell("sleep 3; echo \"@$t ready\"; read q; echo \"$t done\"");
  REQUIRE(slow_start.ask("0 traced", 1, &reply, &why) == Worker::Outcome::Reply);  // 3 s start, 1 s timeout
  CHECK(reply == "done");
  Worker slow_case = shell("echo \"@$t ready\"; read q; sleep 600");
  CHECK(slow_case.ask("0 traced", 1, &reply, &why) == Worker::Outcome::TimedOut);
  CHECK(slow_case.last_note().empty());  // ("ready" is not a note of the case)
}

TEST_CASE("a worker that forked and then crashed is known to have crashed, and its children die with it") {
  // the child holds the result pipe open: no end of file tells that the worker is gone
  Worker w = shell("read q; echo \"@$t kernel\"; sleep 6013 & kill -SEGV $$");
  std::string reply, why;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(w.ask("0 traced", 60, &reply, &why) == Worker::Outcome::Died);  // not a timeout
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK(why.find("SEGV") != std::string::npos);
  CHECK(w.last_note() == "kernel");
  CHECK(std::system("pgrep -f 'sleep 601[3]' > /dev/null") != 0);  // the forked child is gone
}
