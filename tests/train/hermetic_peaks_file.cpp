// The test binary never reads or writes the user's remembered machine peaks
// (~/.cache/mixprec/machine_peaks.json): StepBenchmark::run remembers them, and a test's sample
// must neither land in that file nor be raised by it. Set before main() runs and whatever the
// environment says, so it holds however the binary is started (ctest, the direct runs of
// scripts/test-cpu-profiles.sh, by hand); the tests of the remembering set their own file.
#include <cstdlib>

namespace {

[[maybe_unused]] const bool peaks_file_off = ::setenv("MIXPREC_PEAKS_FILE", "off", 1) == 0;

}  // namespace
