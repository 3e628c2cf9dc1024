// Built only in the TSan run: a deliberate data race in test code next to kvidx calls. ctest
// expects TSan to report it, which proves the suppressions (tsan.supp) hide only the
// uninstrumented library's frames and not races in code that uses it.
#include <thread>

#include "kvidx.hpp"

int main() {
  auto created = kvidx::Indexer::create();
  if (!created) return 2;
  kvidx::Indexer idx = std::move(created).value();
  long unsynchronized = 0;  // written by both threads without synchronization: a real race
  auto work = [&idx, &unsynchronized] {
    const std::uint64_t q[] = {1, 2, 3};
    kvidx::MatchBuffer buf;
    for (int i = 0; i < 1000; ++i) {
      if (!idx.find_matches(q, buf).ok()) return;
      ++unsynchronized;
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  return unsynchronized > 0 ? 0 : 1;
}
