-- brickdl tuning database.
-- This file is the contract between the tuner (search/, core/store/) and the readers
-- (brickdl-query, results/ figure scripts, experiments/baselines/). The store embeds it at
-- build time; results/brickdl_store.py reads it at run time. Run on an empty database it
-- creates the current schema, meta rows included. Forward migrations from older versions live
-- in core/store/detail/schema.cpp. Times are milliseconds, sizes bytes, timestamps ISO-8601
-- UTC text.

CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
-- The schema version is stated once, in the statement below: CMake reads it into the C++ store
-- (kStoreSchemaVersion) and results/brickdl_store.py into the Python readers. Bumping it is
-- this one edit plus a migration step in core/store/detail/schema.cpp.
INSERT OR IGNORE INTO meta (key, value) VALUES ('application', 'brickdl'), ('schema_version', '6');

-- Where a measurement was taken: 'cpu:<model>' or 'gpu:<name>/sm<cc>/drv<..>/cuda<..>/cudnn<..>',
-- or 'model:<gpu spec name>' for model-only runs (predictions, nothing measured).
CREATE TABLE IF NOT EXISTS targets (
  id          INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  backend     TEXT NOT NULL,            -- 'cpu' | 'cuda' | 'none'
  description TEXT NOT NULL DEFAULT ''
);

CREATE TABLE IF NOT EXISTS runs (
  id            INTEGER PRIMARY KEY,
  experiment    TEXT NOT NULL,          -- experiment name (file stem)
  experiment_path TEXT NOT NULL DEFAULT '',
  config_json   TEXT NOT NULL DEFAULT '{}',
  model         TEXT NOT NULL,          -- zoo name or 'custom'
  batch         INTEGER NOT NULL,
  precision     TEXT NOT NULL,          -- 'fp32' | 'tf32' | 'bf16' | 'fp16'
  gpu_spec      TEXT NOT NULL,          -- the GPU spec the model predicted for
  target_id     INTEGER NOT NULL REFERENCES targets(id),
  git_revision  TEXT NOT NULL,
  started_at    TEXT NOT NULL,
  ended_at      TEXT,
  status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'aborted', 'killed')),
  -- Who runs it, so that a run whose process is gone is told from a live one: the host name,
  -- the process id and the process's start ('<boot id>:<start time in clock ticks>', from
  -- /proc; '' where unknown), which tells a reused pid apart. heartbeat_at: the last sign of
  -- life, refreshed every 15 s while the run is running. A later tuner on the same host marks
  -- a `running` run whose process is gone `killed` (ended_at = its last heartbeat).
  host          TEXT NOT NULL DEFAULT '',
  pid           INTEGER,
  process_start TEXT NOT NULL DEFAULT '',
  heartbeat_at  TEXT
);

-- A group's canonical signature: its layers' ops, attributes and shapes, batch and precision,
-- independent of layer names and positions, so repeated blocks share results.
CREATE TABLE IF NOT EXISTS workloads (
  id          INTEGER PRIMARY KEY,
  signature   TEXT NOT NULL UNIQUE,
  num_layers  INTEGER NOT NULL,
  description TEXT NOT NULL DEFAULT '', -- human-readable: 'conv3x3 64->64 56x56 +relu | ...'
  macs        INTEGER NOT NULL DEFAULT 0
);

-- Which groups of a run's graph were considered, and which workload each one is.
CREATE TABLE IF NOT EXISTS run_groups (
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  workload_id  INTEGER NOT NULL REFERENCES workloads(id),
  first_layer  INTEGER NOT NULL,        -- ids in the fused graph
  last_layer   INTEGER NOT NULL,
  layer_names  TEXT NOT NULL,           -- 'layer1.0.conv1 .. layer1.0.conv3'
  label        TEXT NOT NULL DEFAULT '', -- e.g. 'subgraph 3', '3+3 #1'
  PRIMARY KEY (run_id, first_layer, last_layer)
);

-- A configuration of a workload: brick extents bd x bh x bw, channel block cb (0 = all
-- channels), batch block bn (images per unit of work, BrickShape::nb), thread block cluster cl
-- (CTAs per unit, BrickShape::cl; 1 = none) and threads per block.
-- Layerwise candidates have no brick: bd = bh = bw = cb = threads = 0 and bn = cl = 1.
CREATE TABLE IF NOT EXISTS candidates (
  id          INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  strategy    TEXT NOT NULL CHECK (strategy IN ('layerwise', 'padded', 'memoized')),
  bd INTEGER NOT NULL, bh INTEGER NOT NULL, bw INTEGER NOT NULL,
  cb INTEGER NOT NULL,
  bn INTEGER NOT NULL DEFAULT 1 CHECK (bn >= 1),
  cl INTEGER NOT NULL DEFAULT 1 CHECK (cl >= 1),
  threads     INTEGER NOT NULL,
  UNIQUE (workload_id, strategy, bd, bh, bw, cb, bn, cl, threads)
);

CREATE TABLE IF NOT EXISTS predictions (
  candidate_id       INTEGER NOT NULL REFERENCES candidates(id),
  gpu_spec           TEXT NOT NULL,
  model_version      TEXT NOT NULL,
  feasible           INTEGER NOT NULL,
  reason             TEXT NOT NULL DEFAULT '',
  time_ms            REAL NOT NULL,
  time_dram_ms       REAL NOT NULL,     -- components, as in the paper's figures
  time_l2_ms         REAL NOT NULL,
  time_compute_ms    REAL NOT NULL,
  time_atomics_compulsory_ms REAL NOT NULL,
  time_atomics_conflict_ms   REAL NOT NULL,
  time_other_ms      REAL NOT NULL,     -- launch and sync
  flops              REAL NOT NULL,     -- executed (useful + redundant)
  redundant_flops    REAL NOT NULL,
  l1_bytes           REAL NOT NULL,     -- global loads + stores issued by the kernel(s)
  l2_bytes           REAL NOT NULL,
  dram_bytes         REAL NOT NULL,
  dram_lower_bound   REAL NOT NULL,     -- compulsory traffic of the group
  atomics_compulsory REAL NOT NULL,
  atomics_conflict   REAL NOT NULL,
  PRIMARY KEY (candidate_id, gpu_spec, model_version)
);

-- The layerwise baseline of a workload as another library schedule than the one its layerwise
-- candidate stands for, predicted by the model: 'paper-unfused' is the BrickDL paper's own
-- cuDNN baseline (model/baseline.h: each conv with a fixed implicit-GEMM algorithm, then its
-- bias, batch-norm and activation as passes of their own). The columns are those of
-- predictions; the honest baseline ('cudnn-fused': conv + bias + activation in one call) is the
-- prediction of the workload's layerwise candidate, or of its layers' single-layer ones added up.
-- A GPU's measurement of 'paper-unfused' is the counter 'variant.paper_unfused_ms' of the
-- layerwise candidate's measurement (cuda backend).
CREATE TABLE IF NOT EXISTS baseline_predictions (
  workload_id        INTEGER NOT NULL REFERENCES workloads(id),
  gpu_spec           TEXT NOT NULL,
  model_version      TEXT NOT NULL,
  baseline           TEXT NOT NULL,     -- 'paper-unfused'
  time_ms            REAL NOT NULL,
  time_dram_ms       REAL NOT NULL,
  time_l2_ms         REAL NOT NULL,
  time_compute_ms    REAL NOT NULL,
  time_atomics_compulsory_ms REAL NOT NULL,
  time_atomics_conflict_ms   REAL NOT NULL,
  time_other_ms      REAL NOT NULL,     -- launches of every pass
  flops              REAL NOT NULL,
  redundant_flops    REAL NOT NULL,
  l1_bytes           REAL NOT NULL,
  l2_bytes           REAL NOT NULL,
  dram_bytes         REAL NOT NULL,
  dram_lower_bound   REAL NOT NULL,
  atomics_compulsory REAL NOT NULL,
  atomics_conflict   REAL NOT NULL,
  launches           INTEGER NOT NULL,  -- kernels and library calls per run of the group
  PRIMARY KEY (workload_id, gpu_spec, model_version, baseline)
);

CREATE TABLE IF NOT EXISTS measurements (
  id            INTEGER PRIMARY KEY,
  candidate_id  INTEGER NOT NULL REFERENCES candidates(id),
  target_id     INTEGER NOT NULL REFERENCES targets(id),
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  status        TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'launch_error',
                                                'timeout', 'wrong_result', 'unsupported',
                                                'crashed')),
  error         TEXT NOT NULL DEFAULT '',
  median_ms     REAL, min_ms REAL, max_ms REAL, p25_ms REAL, p75_ms REAL,
  max_rel_error REAL,
  created_at    TEXT NOT NULL,
  UNIQUE (candidate_id, target_id, run_id)
);

-- Candidates being measured: a tuner claims a (candidate, target) before measuring it, so
-- that tuners sharing a database measure each candidate once; the claim goes with the
-- measurement (or when its run ends). A claim whose run is no longer live (ended, killed, or
-- stale on another host) is taken over.
CREATE TABLE IF NOT EXISTS claims (
  candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  target_id    INTEGER NOT NULL REFERENCES targets(id),
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  claimed_at   TEXT NOT NULL,
  PRIMARY KEY (candidate_id, target_id)
);

CREATE TABLE IF NOT EXISTS samples (
  measurement_id INTEGER NOT NULL REFERENCES measurements(id),
  idx            INTEGER NOT NULL,
  time_ms        REAL NOT NULL,
  PRIMARY KEY (measurement_id, idx)
);

-- Counter names: CUPTI metric names on a GPU (dram__bytes_read.sum, ...) or the CPU
-- executor's counts (flops, bricks_computed, memo_claims, memo_hits, memo_conflicts,
-- bytes_loaded, bytes_stored, ...).
CREATE TABLE IF NOT EXISTS counters (
  measurement_id INTEGER NOT NULL REFERENCES measurements(id),
  name           TEXT NOT NULL,
  value          REAL NOT NULL,
  PRIMARY KEY (measurement_id, name)
);

CREATE TABLE IF NOT EXISTS plans (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  kind          TEXT NOT NULL,          -- 'predicted' (model only) | 'measured' (re-planned)
  json          TEXT NOT NULL,
  predicted_ms  REAL NOT NULL,
  measured_ms   REAL,
  layerwise_predicted_ms REAL NOT NULL,
  layerwise_measured_ms  REAL,
  created_at    TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS plan_groups (
  plan_id       INTEGER NOT NULL REFERENCES plans(id),
  idx           INTEGER NOT NULL,
  candidate_id  INTEGER NOT NULL REFERENCES candidates(id),
  first_layer   INTEGER NOT NULL,
  last_layer    INTEGER NOT NULL,
  PRIMARY KEY (plan_id, idx)
);

-- Framework baselines for Fig 7 (PyTorch eager, torch.compile, JAX/XLA), written by the
-- scripts in experiments/baselines/.
CREATE TABLE IF NOT EXISTS baselines (
  id          INTEGER PRIMARY KEY,
  target_id   INTEGER NOT NULL REFERENCES targets(id),
  model       TEXT NOT NULL,
  batch       INTEGER NOT NULL,
  precision   TEXT NOT NULL,
  framework   TEXT NOT NULL,            -- 'pytorch-eager' | 'torch-compile' | 'jax-xla' | 'cudnn-tf32' ...
  median_ms   REAL NOT NULL,
  min_ms REAL, max_ms REAL, p25_ms REAL, p75_ms REAL,
  samples_json TEXT NOT NULL DEFAULT '[]',
  created_at  TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS measurements_by_candidate ON measurements(candidate_id, target_id);
CREATE INDEX IF NOT EXISTS candidates_by_workload ON candidates(workload_id);
