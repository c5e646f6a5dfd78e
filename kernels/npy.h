#pragma once
// NumPy .npy files (format version 1.0): C-order, little-endian float32 ('<f4') written;
// '<f4' and '<f8' read (float64 is narrowed to float32), versions 1.0 to 3.0. numpy.load /
// numpy.save compatible. Reading trusts nothing in a header: the dict is parsed strictly, its
// length is at most 1 MiB, and the shape times the item size must equal the bytes after the
// header (and stay within core/limits.h's elements of a tensor) before anything is allocated.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace brickdl::kernels {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Throws UserError naming the file when it cannot be written.
void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& data);
// Shape (N, C, H, W) for 2-D tensors, (N, C, D, H, W) for 3-D, (N, C) for flat ones.
void write_npy(const std::string& path, const Tensor& t);
// Throws UserError naming the file and what is wrong with it.
NpyArray read_npy(const std::string& path);
// Reads a tensor that must have `shape` (as write_npy writes it); UserError when not.
Tensor read_npy_tensor(const std::string& path, const TensorShape& shape);
// The array `a`, read from `path`, as a tensor that must have `shape`; UserError naming `path`
// (and `what`, e.g. "input 'x'", when given) when its shape differs.
Tensor npy_to_tensor(NpyArray a, const TensorShape& shape, const std::string& path,
                     const std::string& what = "");

// The .npy shape of a tensor shape (see write_npy).
std::vector<int64_t> npy_shape(const TensorShape& shape);

} // namespace brickdl::kernels
