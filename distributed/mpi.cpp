// The MPI transport of distributed/mpi.h (built when CMake finds MPI; mpi_absent.cpp otherwise).
#include "distributed/mpi.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "kernels/cuda/cuda_measurer.h"
#include "search/measurers.h"

namespace brickdl::distributed {

namespace {

using search::WorkerStats;

struct Message {
  int source = 0;
  int tag = 0;
  nlohmann::json body;
};

void send(int dest, Tag tag, const nlohmann::json& body) {
  const std::string text = body.dump();
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD);
}

// The next message from `source` with `tag` (MPI_ANY_SOURCE / MPI_ANY_TAG allowed), polled
// with 1 ms sleeps; nullopt when `stop` is set first.
std::optional<Message> poll(int source, int tag, const std::atomic<bool>* stop) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &status);
    if (flag) {
      int n = 0;
      MPI_Get_count(&status, MPI_CHAR, &n);
      std::string text(static_cast<size_t>(n), '\0');
      MPI_Recv(text.data(), n, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded())
        throw InternalError(
            fmt::format("rank {} sent a message that is no JSON", status.MPI_SOURCE));
      return Message{status.MPI_SOURCE, status.MPI_TAG, std::move(body)};
    }
    if (stop && stop->load())
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Index of this rank among the worker ranks (all but 0) of its node.
int worker_index_on_node(int rank) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int n = 0;
  MPI_Comm_size(node, &n);
  std::vector<int> ranks(static_cast<size_t>(n));
  MPI_Allgather(&rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  int index = 0;
  for (int r : ranks)
    if (r != 0 && r < rank)
      ++index;
  return index;
}

} // namespace

bool built_with_mpi() {
  return true;
}

// ---- Session ------------------------------------------------------------------------------

struct Session::Impl {
  int rank = 0, size = 1, local_worker = 0;
  std::string host;
  bool finalize = true;
};

Session::Session(int* argc, char*** argv) : impl_(std::make_unique<Impl>()) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &impl_->size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  impl_->host.assign(name, static_cast<size_t>(len));
  impl_->local_worker = worker_index_on_node(impl_->rank);
}

Session::~Session() {
  if (impl_->finalize)
    MPI_Finalize();
}

int Session::rank() const {
  return impl_->rank;
}
int Session::size() const {
  return impl_->size;
}
const std::string& Session::host() const {
  return impl_->host;
}
int Session::local_worker_index() const {
  return impl_->local_worker;
}

void Session::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void Session::leave() {
  impl_->finalize = false;
}

// ---- rank 0: Workers and their pools -------------------------------------------------------

struct Workers::State {
  explicit State(int n) : count(n) {}
  int count;
  std::set<int> busy; // ranks with a job in flight
};

namespace {

class MpiPool final : public search::MeasurePool {
public:
  MpiPool(std::shared_ptr<Workers::State> state, const TargetGroup& group,
          const std::vector<Hello>& hellos)
      : state_(std::move(state)), target_(group.target), backend_(group.backend) {
    for (int r : group.ranks) {
      WorkerStats w;
      w.rank = r;
      w.target = group.target;
      for (const Hello& h : hellos)
        if (h.rank == r)
          w.host = h.host;
      stats_.emplace(r, w);
      idle_.insert(r);
    }
  }
  std::string target() const override { return target_; }
  std::string backend() const override { return backend_; }
  int slots() const override { return static_cast<int>(stats_.size()); }
  int in_flight() const override { return static_cast<int>(jobs_.size()); }

  void submit(const search::MeasureJob& job) override {
    BRICKDL_CHECK(!idle_.empty(), "MpiPool::submit with every worker busy");
    const int rank = *idle_.begin();
    idle_.erase(idle_.begin());
    send(rank, kJob, {{"ticket", job.ticket}, {"group", job.ref.group}, {"index", job.ref.index}});
    jobs_.emplace(rank, job.ticket);
    state_->busy.insert(rank);
  }

  std::optional<search::MeasureDone> next(const std::atomic<bool>* stop) override {
    if (jobs_.empty())
      return std::nullopt;
    const std::optional<Message> msg = poll(MPI_ANY_SOURCE, kResult, stop);
    if (!msg)
      return std::nullopt;
    const auto job = jobs_.find(msg->source);
    BRICKDL_CHECK(job != jobs_.end(), "a result from rank " << msg->source << ", which has no job");
    BRICKDL_CHECK(msg->body.value("ticket", int64_t{-1}) == job->second,
                  "rank " << msg->source << " answered another job than its own");
    search::MeasureDone done;
    done.ticket = job->second;
    done.worker = msg->source;
    done.wall_s = msg->body.value("wall_s", 0.0);
    jobs_.erase(job);
    idle_.insert(msg->source);
    state_->busy.erase(msg->source);
    WorkerStats& w = stats_.at(msg->source);
    if (msg->body.contains("error")) // the worker's measurer threw: a broken setup, as in process
      throw std::runtime_error(
          fmt::format("rank {} ({}): {}", w.rank, w.host, msg->body["error"].get<std::string>()));
    done.result = result_from_json(msg->body.at("result"));
    ++w.measured;
    w.failed += done.result.status != MeasureStatus::kOk;
    w.busy_s += done.wall_s;
    return done;
  }

  std::vector<WorkerStats> workers() const override {
    std::vector<WorkerStats> out;
    for (const auto& [rank, w] : stats_)
      out.push_back(w);
    return out;
  }

private:
  std::shared_ptr<Workers::State> state_;
  std::string target_, backend_;
  std::map<int, WorkerStats> stats_;
  std::set<int> idle_;
  std::map<int, int64_t> jobs_; // rank → ticket
};

} // namespace

Workers::Workers(Session& session) : state_(std::make_shared<State>(session.size() - 1)) {
  BRICKDL_CHECK(session.rank() == 0, "Workers lives on rank 0");
}

Workers::~Workers() = default;

int Workers::count() const {
  return state_->count;
}

int Workers::busy() const {
  return static_cast<int>(state_->busy.size());
}

std::vector<Hello> Workers::prepare(int index, const std::atomic<bool>* stop) {
  BRICKDL_CHECK(state_->busy.empty(), "prepare with jobs in flight");
  for (int r = 1; r <= state_->count; ++r)
    send(r, kPrepare, {{"experiment", index}});
  std::map<int, Hello> answers;
  while (static_cast<int>(answers.size()) < state_->count) {
    const std::optional<Message> msg = poll(MPI_ANY_SOURCE, kHello, stop);
    if (!msg)
      break;
    Hello h = hello_from_json(msg->body);
    h.rank = msg->source;
    answers[h.rank] = std::move(h);
  }
  std::vector<Hello> out;
  for (auto& [rank, h] : answers)
    out.push_back(std::move(h));
  return out;
}

std::unique_ptr<search::MeasurePool> Workers::pool(const TargetGroup& group,
                                                   const std::vector<Hello>& hellos) {
  return std::make_unique<MpiPool>(state_, group, hellos);
}

bool Workers::quit() {
  if (!state_->busy.empty())
    return false;
  for (int r = 1; r <= state_->count; ++r)
    send(r, kQuit, nlohmann::json::object());
  return true;
}

// ---- worker ranks ------------------------------------------------------------------------

namespace {

// What a worker holds for the experiment it was last prepared for.
struct Prepared {
  int index = -1;
  ExperimentConfig experiment;
  std::unique_ptr<search::SearchSpace> space;
  std::unique_ptr<Measurer> measurer;
};

// `backend: auto` on a worker without a GPU: a plain run plans such an experiment from the
// model and only validates it on the CPU (search::make_measuring), since CPU times must not
// re-plan a GPU target; a worker rank cannot do that, so it is refused with what would work.
void refuse_auto_without_gpu(const std::string& backend) {
  std::string why_not;
  if (backend != "auto" || search::resolve_backend("auto", &why_not) == "cuda")
    return;
  throw UserError("backend 'auto' found no GPU on this worker (" + why_not +
                  "); CPU times never re-plan a GPU target: set measurement.backend to 'cpu' to "
                  "tune for this CPU, or run brickdl-tune without mpirun to plan from the model "
                  "and validate the plan on the CPU");
}

Hello prepare_here(Session& session, const ExperimentLoader& load, int index, Prepared& p) {
  Hello h;
  h.rank = session.rank();
  h.host = session.host();
  p = Prepared{};
  try {
    p.index = index;
    p.experiment = load(index);
    p.space = std::make_unique<search::SearchSpace>(search::SearchSpace::build(
        fuse_for_inference(p.experiment.graph), p.experiment.search, p.experiment.file));
    h.digest = experiment_digest(*p.space, p.experiment.measurement);
    MeasurementConfig config = p.experiment.measurement;
    // The n-th worker of a node takes the n-th visible GPU; where a launcher shows each rank
    // its own GPU (one visible), that one. Two workers on one GPU: rank 0 refuses the second.
    const int gpus = cuda::cuda_device_count();
    config.device = gpus > 0 ? session.local_worker_index() % gpus : 0;
    refuse_auto_without_gpu(config.backend);
    p.measurer = search::make_measurer(config.backend, config, search::Logger());
    if (!p.measurer)
      throw UserError("backend '" + config.backend + "' measures nothing");
    h.target = p.measurer->target();
    h.backend = p.measurer->backend();
    if (h.backend == "cuda")
      h.device = cuda::cuda_pci_bus_id(config.device);
  } catch (const std::exception& e) {
    h.error = e.what();
    p = Prepared{};
  }
  return h;
}

nlohmann::json run_job(const nlohmann::json& job, Prepared& p) {
  return answer_job(job, p.space.get(), p.measurer.get(), p.experiment.measurement.options);
}

} // namespace

int serve(Session& session, const ExperimentLoader& load, const std::atomic<bool>& stop) {
  Prepared prepared;
  for (;;) {
    const std::optional<Message> msg = poll(0, MPI_ANY_TAG, &stop);
    if (!msg)
      return 130;
    switch (msg->tag) {
    case kQuit: return 0;
    case kPrepare:
      send(0, kHello,
           to_json(prepare_here(session, load, msg->body.value("experiment", -1), prepared)));
      break;
    case kJob: send(0, kResult, run_job(msg->body, prepared)); break;
    default:
      throw InternalError(fmt::format("a message with unknown tag {} from rank 0", msg->tag));
    }
  }
}

} // namespace brickdl::distributed
