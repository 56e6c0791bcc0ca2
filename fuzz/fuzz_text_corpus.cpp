// Fuzzes data::load_text_corpus on one file, then cuts the text into evaluation and training
// windows (TextWindows) with a context and batch size taken from the first two bytes.
#include "fuzz_util.h"
#include "mixprec/data/text_corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::int64_t context = data[0] % 17;  // 0 is invalid on purpose
  const std::int64_t batch = data[1] % 5;
  const std::string path =
      mixprec::fuzz::write_scratch("input.txt", mixprec::fuzz::as_view(data + 2, size - 2));
  return mixprec::fuzz::run_one([&] {
    const mixprec::data::TextCorpus corpus = mixprec::data::load_text_corpus({path});
    const mixprec::data::TextSplit split = mixprec::data::split_text(corpus, 0.25);
    mixprec::data::TextWindowsOptions eval_opts;
    eval_opts.context = context;
    eval_opts.batch_size = batch;
    eval_opts.random = false;
    mixprec::data::Batch b;
    for (const auto* text : {&split.train, &split.validation}) {
      try {
        mixprec::data::TextWindows windows(*text, eval_opts);
        windows.start_epoch(0);
        while (windows.next(b)) {
        }
      } catch (const mixprec::Error&) {
      }
    }
    mixprec::data::TextWindowsOptions train_opts;
    train_opts.context = context;
    train_opts.batch_size = batch;
    train_opts.batches_per_epoch = 2;
    mixprec::data::TextWindows windows(corpus.bytes, train_opts);
    windows.start_epoch(1);
    while (windows.next(b)) {
    }
  });
}
