// The journal of a sampling job (compgen/sampling/journal.py): every round's accepted
// samples, then a "#round" line with where the job stands, appended to OUT.partial as the
// rounds end, and the state a resumed job starts from.
//
// compgen writes the journal's first line (the job's key) and checks it on --resume
// before this program starts: the key is a digest of the export's manifest and of the
// options as compgen resolved them, which this program never sees whole. This program
// appends the rounds only, in the lines compgen reads back:
//   x <TAB> y <TAB> logprob            (tokens as in the samples TSV, logprob exact)
//   #round <TAB> rounds <TAB> first <TAB> stalled <TAB> strategy <TAB> temperature
// One write per round, an fsync at most every kSyncSeconds (and at exit): a killed runner
// loses no written round; a lost machine at most those seconds of rounds and a cut-off
// round, which the reader drops (their samples are decoded again).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace compgen {

// journal.py SYNC_SECONDS: an fsync per round was 7 % of a large job's time
constexpr double kSyncSeconds = 5.0;

// compgen.decoding.contract.MODES, by mode number (decode.hpp kGreedy ...)
constexpr const char* kStrategyNames[] = {"greedy", "temperature", "mixed", "beam"};

// A double as its shortest text that reads back exactly, written as Python's repr writes
// it for the values a journal holds (a whole number gains ".0").
inline std::string exact(double v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eni") == std::string::npos) text += ".0";
  return text;
}

// Where an interrupted job stood after its last complete round (journal.py Position), sent
// by `compgen sample --resume` as resume_* job records: the loop state and the samples
// accepted until then in acceptance order (ids of x <sep> y, the exact logprob).
struct Resume {
  bool active = false;
  int64_t rounds = 0, first = 0, stalled = 0;
  int mode = 0;
  double temperature = 1.0;
  std::vector<std::pair<std::vector<int64_t>, double>> samples;
};

inline double read_exact(const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw std::runtime_error("job record " + key + ": number expected");
  return v;
}

inline int64_t read_integer(const std::string& key, const std::string& text) {
  int64_t v = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), v);
  if (result.ec != std::errc() || result.ptr != text.data() + text.size())
    throw std::runtime_error("job record " + key + ": integer expected");
  return v;
}

// Reads one job record into `resume` when its key is a resume key; false for any other.
inline bool read_resume_record(const std::string& key, const std::string& value, Resume& resume) {
  if (key.rfind("resume_", 0) != 0) return false;
  std::istringstream in(value);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  const bool sample = key == "resume_sample";
  if (sample ? words.size() < 2 : words.size() != 1)
    throw std::runtime_error("job record " + key + ": bad value");
  if (sample) {
    std::vector<int64_t> row;
    for (size_t i = 0; i + 1 < words.size(); ++i) row.push_back(read_integer(key, words[i]));
    resume.samples.emplace_back(std::move(row), read_exact(key, words.back()));
  } else if (key == "resume_rounds") resume.rounds = read_integer(key, words[0]);
  else if (key == "resume_first") resume.first = read_integer(key, words[0]);
  else if (key == "resume_stalled") resume.stalled = read_integer(key, words[0]);
  else if (key == "resume_mode") resume.mode = static_cast<int>(read_integer(key, words[0]));
  else if (key == "resume_temperature") resume.temperature = read_exact(key, words[0]);
  else throw std::runtime_error("job: unknown key " + key);
  if (resume.mode < 0 || resume.mode > 3) throw std::runtime_error("job: resume_mode out of range");
  resume.active = true;
  return true;
}

// OUT.partial, opened for appending (compgen wrote its first line); closed at exit.
class Journal {
 public:
  ~Journal() {
    if (fd_ >= 0) {
      ::fsync(fd_);
      ::close(fd_);
    }
  }

  void open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(path + ": cannot append to the journal");
  }

  bool active() const { return fd_ >= 0; }

  // One complete round: its accepted samples (TSV lines) and where the job then stands.
  void record(std::string samples, int64_t rounds, int64_t first, int64_t stalled, int mode,
              double temperature) {
    samples += "#round\t" + std::to_string(rounds) + "\t" + std::to_string(first) + "\t" +
               std::to_string(stalled) + "\t" + kStrategyNames[mode] + "\t" +
               exact(temperature) + "\n";
    const char* at = samples.data();
    size_t left = samples.size();
    while (left > 0) {
      const ssize_t wrote = ::write(fd_, at, left);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) throw std::runtime_error(path_ + ": cannot write the journal");
      at += wrote;
      left -= static_cast<size_t>(wrote);
    }
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - synced_).count() < kSyncSeconds) return;
    if (::fsync(fd_) != 0) throw std::runtime_error(path_ + ": cannot write the journal");
    synced_ = now;
  }

 private:
  int fd_ = -1;
  std::string path_;
  std::chrono::steady_clock::time_point synced_ = std::chrono::steady_clock::now();
};

}  // namespace compgen
