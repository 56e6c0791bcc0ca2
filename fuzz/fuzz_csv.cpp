// Fuzzes data::read_csv. The first byte picks the options (header or not, target kind,
// delimiter, standardisation, a named label column, a feature-column list); the rest is the
// file, written to a scratch path because the reader takes one.
#include "fuzz_util.h"
#include "mixprec/data/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t flags = data[0];
  mixprec::data::CsvOptions opts;
  opts.has_header = (flags & 1) == 0;
  opts.target = (flags & 6) == 2   ? mixprec::data::CsvTarget::value
                : (flags & 6) == 4 ? mixprec::data::CsvTarget::none
                                   : mixprec::data::CsvTarget::class_id;
  opts.delimiter = (flags & 8) ? ';' : ',';
  opts.standardize = (flags & 16) == 0;
  if (flags & 32) opts.label_column = "species";
  if (flags & 64) opts.feature_columns = {"petal_length", "sepal_width"};
  const std::string path =
      mixprec::fuzz::write_scratch("input.csv", mixprec::fuzz::as_view(data + 1, size - 1));
  return mixprec::fuzz::run_one([&] { (void)mixprec::data::read_csv(path, opts); });
}
