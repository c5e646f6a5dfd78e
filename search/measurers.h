#pragma once
// Choosing the Measurer for a backend name.
//
//   "none" → no measurer (model only)      "cpu"  → kernels::CpuMeasurer
//   "cuda" → make_cuda_measurer(), or UserError saying why it is not available
//   "auto" → cuda when available, else cpu, with ONE line on the log saying so
#include <memory>
#include <string>

#include "core/experiment.h"
#include "core/measurer.h"
#include "search/tune_context.h"

namespace brickdl::search {

// nullptr for "none". Throws UserError for an unknown backend or an unavailable "cuda".
std::unique_ptr<Measurer> make_measurer(const std::string& backend, const MeasurementConfig& config,
                                        const Logger& log);

// The CUDA backend's measurer when brickdl was built with it and a GPU is present; otherwise
// nullptr and `*why_not` says what is missing. (The CUDA backend plugs in here.)
std::unique_ptr<Measurer> make_cuda_measurer(const MeasurementConfig& config, std::string* why_not);

std::vector<std::string> backend_names(); // none, cpu, cuda, auto

} // namespace brickdl::search
