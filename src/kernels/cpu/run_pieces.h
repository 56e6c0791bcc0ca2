#pragma once
// The pieces of a multi-tensor call on the CPU (the batched optimizer updates and unscale): every
// run cut into chunks, all chunks of all runs then spread over the threads together, so a
// model's many small tensors share the threads instead of running one by one on the calling
// thread. Private to src/kernels/cpu.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace mixprec::kernels::cpu {

/// Elements [begin, begin + count) of run `run`.
struct RunPiece {
  int run;
  std::size_t begin, count;
};

/// The runs 0..runs-1 of count_of(r) elements each, cut into pieces of at most `chunk` elements
/// in run order (an empty run gives none); *total gets the elements of all runs.
template <class CountOf>
std::vector<RunPiece> cut_into_pieces(int runs, const CountOf& count_of, std::size_t chunk,
                                      std::size_t* total) {
  std::vector<RunPiece> pieces;
  *total = 0;
  for (int r = 0; r < runs; ++r) {
    const auto n = static_cast<std::size_t>(count_of(r));
    for (std::size_t at = 0; at < n; at += chunk) pieces.push_back({r, at, std::min(chunk, n - at)});
    *total += n;
  }
  return pieces;
}

}  // namespace mixprec::kernels::cpu
