// distributed/mpi.h without MPI (CMake found no MPI): a Session cannot be made, and says why.
#include "core/error.h"
#include "distributed/mpi.h"

namespace brickdl::distributed {

bool built_with_mpi() {
  return false;
}

struct Session::Impl {};

Session::Session(int*, char***) {
  throw UserError("this brickdl was built without MPI, so it cannot run under mpirun: install "
                  "Open MPI (Debian: libopenmpi-dev openmpi-bin) and rebuild, or run it "
                  "without mpirun");
}
Session::~Session() = default;
int Session::rank() const {
  return 0;
}
int Session::size() const {
  return 1;
}
const std::string& Session::host() const {
  static const std::string none;
  return none;
}
int Session::local_worker_index() const {
  return 0;
}
void Session::abort(int code) {
  std::_Exit(code);
}
void Session::leave() {}

struct Workers::State {};
Workers::Workers(Session&) {}
Workers::~Workers() = default;
int Workers::count() const {
  return 0;
}
std::vector<Hello> Workers::prepare(int, const std::atomic<bool>*) {
  return {};
}
std::unique_ptr<search::MeasurePool> Workers::pool(const TargetGroup&, const std::vector<Hello>&) {
  throw InternalError("no MPI in this build");
}
int Workers::busy() const {
  return 0;
}
bool Workers::quit() {
  return true;
}
int serve(Session&, const ExperimentLoader&, const std::atomic<bool>&) {
  throw InternalError("no MPI in this build");
}

} // namespace brickdl::distributed
