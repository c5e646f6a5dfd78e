#pragma once
// Cold runs on a CPU: before a timed run, every cache level is emptied of the data the run
// reads, by reading a buffer twice the size of the last-level cache (a read sweep: a written
// buffer would leave dirty lines whose write-backs land in the timed run). MeasureOptions::
// flush_l2 (the experiment's measurement.flush_l2, true by default) asks for it.
#include <cstdint>

namespace brickdl::kernels::cpu {

// Bytes of the last-level cache (sysconf; 32 MiB when the system does not say).
int64_t last_level_cache_bytes();

// Reads the sweep buffer on `threads` threads (each its share, so each core's private caches
// are swept too). Returns a value that depends on every byte, so no read is optimised away.
double flush_caches(int threads);

} // namespace brickdl::kernels::cpu
