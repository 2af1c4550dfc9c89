// main.cpp: mmac-capture's command line: run a .mmv file's cases on the device and write
// them back with the device's d (--vectors), answer `mmac serve`'s black-box protocol on
// stdin/stdout (--serve), or list the instructions this build has (--list).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "capture.h"

namespace {

using namespace capture;

const char *const kUsage =
    "usage: mmac-capture --instr NAME --vectors IN.mmv [-o OUT.mmv] [options]\n"
    "       mmac-capture --serve --instr NAME [options]\n"
    "       mmac-capture --list\n"
    "\n"
    "Runs the cases of IN.mmv (`mmac gen` output) on the device, one dot-product-add each,\n"
    "packed into the warp's register images as `mmac layout` lays them out, and writes the\n"
    "file back with the device's d (to OUT.mmv, or stdout): `mmac test SPEC --vectors OUT.mmv`\n"
    "is then the conformance check. --instr may be left out with --vectors: the file's\n"
    "`# instruction:` header names it. --serve answers `mmac serve`'s protocol instead\n"
    "(`c=HEX a=HEX,... b=HEX,...` per line on stdin, with `pos=` for a sparse and `sa=`,\n"
    "`sb=` for a block-scaled instruction; `d=HEX` per line on stdout), for\n"
    "`mmac infer --exec`.\n"
    "\n"
    "options:\n"
    "  --cases-per-mma N   cases run by one warp-level MMA (1 .. min(m, n); default the most)\n";

struct Options {
    std::string instr, vectors, output;
    bool serve = false, list = false;
    int per_mma = 0;
    DeviceOptions device;
};

Options parse_args(int argc, char **argv) {
    Options o;
    auto value = [&](int &i, const std::string &flag) -> std::string {
        if (i + 1 >= argc) throw InputError(flag + " takes a value\n" + kUsage);
        return argv[++i];
    };
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--instr") o.instr = value(i, a);
        else if (a == "--vectors") o.vectors = value(i, a);
        else if (a == "-o" || a == "--output") o.output = value(i, a);
        else if (a == "--spec") o.device.spec = value(i, a);
        else if (a == "--serve") o.serve = true;
        else if (a == "--list") o.list = true;
        else if (a == "--cases-per-mma") {
            std::string v = value(i, a);
            char *end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || n < 1 || n > 4096)
                throw InputError("--cases-per-mma takes a positive number, not `" + v + "`");
            o.per_mma = static_cast<int>(n);
        } else if (a == "-h" || a == "--help") {
            std::cout << kUsage << kBuildHelp;
            std::exit(0);
        } else {
            throw InputError("unknown argument `" + a + "`\n" + kUsage);
        }
    }
    int modes = !o.vectors.empty() + o.serve + o.list;
    if (modes != 1) throw InputError(std::string("give one of --vectors, --serve, --list\n") + kUsage);
    if (o.serve && o.instr.empty()) throw InputError("--serve needs --instr NAME");
    if (!o.output.empty() && o.vectors.empty()) throw InputError("-o goes with --vectors");
    return o;
}

const Instr &lookup(const std::string &name) {
    const Instr *ins = find_instruction(name);
    if (!ins)
        throw InputError("`" + shown(name) + "` is not an instruction of the capture kit (nearest: " +
                         suggest(name) + "; `mmac-capture --list` lists them)");
    return *ins;
}

int per_mma_of(const Options &o, const Instr &ins) {
    int most = max_cases_per_mma(ins);
    if (o.per_mma > most)
        throw InputError("--cases-per-mma " + std::to_string(o.per_mma) + ": " + ins.name +
                         " runs at most " + std::to_string(most) + " cases per MMA");
    return o.per_mma ? o.per_mma : most;
}

int list() {
    for (const Instr *i : instructions())
        std::cout << i->name << '\t' << i->ptx << '\t' << i->targets << '\n';
    return 0;
}

// Write `text` to `path`: a regular file (or none yet) through a temporary file beside it,
// renamed over it once complete, so that a failed write (a full disk, a file-size limit)
// leaves the old file whole and `-o` may name the input; anything else (a device, a FIFO)
// is written in place.
void write_file(const std::string &path, const std::string &text) {
    struct stat st;
    bool exists = ::stat(path.c_str(), &st) == 0;
    bool regular = !exists || S_ISREG(st.st_mode);
    std::string to = regular ? path + ".mmac-capture-" + std::to_string(::getpid()) + ".part" : path;
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    int err = errno;
    bool written = static_cast<bool>(out);
    // (the replaced file's permissions kept)
    if (written && regular && exists) ::chmod(to.c_str(), st.st_mode & 07777);
    if (written && regular && std::rename(to.c_str(), path.c_str()) != 0) {
        err = errno;
        written = false;
    }
    if (!written) {
        if (regular) std::remove(to.c_str());
        throw InputError(path + ": cannot write: " + std::strerror(err));
    }
}

int vectors(const Options &o) {
    const Instr *ins = o.instr.empty() ? nullptr : &lookup(o.instr);
    Mmv mmv = read_mmv(o.vectors, ins);
    int per_mma = per_mma_of(o, *ins);
    std::unique_ptr<Device> dev = open_device(*ins, o.device);
    std::vector<const Case *> cases;
    for (const Case &c : mmv.cases) cases.push_back(&c);
    std::vector<uint64_t> d = run_cases(*dev, *ins, cases, per_mma);
    std::vector<std::string> notes = {
        "captured: " + dev->describe(),
        "capture: mmac-capture, " + std::string(ins->ptx) + ", " + std::to_string(per_mma) +
            (per_mma == 1 ? " case" : " cases") + " per mma, d= is the device's"};
    std::string text = write_mmv(mmv, *ins, d, notes);
    if (o.output.empty()) {
        std::cout << text << std::flush;
        if (!std::cout) throw DeviceError("cannot write to stdout");
    } else {
        write_file(o.output, text);
    }
    std::cerr << "mmac-capture: " << ins->name << ": " << d.size() << " cases on "
              << dev->describe() << '\n';
    return 0;
}

// Write all of s to stdout (fd 1), unbuffered: the answers must reach mmac before the next
// read blocks.
void write_all(const std::string &s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = ::write(1, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw DeviceError(std::string("cannot write answers: ") + std::strerror(errno));
        done += static_cast<size_t>(n);
    }
}

// The black-box protocol: whatever has arrived is one batch (the complete lines of one
// read), answered in order and written at once; blank lines and `#` comments are skipped.
// A malformed request: the requests before it are answered, then the error, exit 2.
int serve(const Options &o) {
    const Instr &ins = lookup(o.instr);
    int per_mma = per_mma_of(o, ins);
    std::unique_ptr<Device> dev = open_device(ins, o.device);
    std::string pending;
    // the start of `pending` searched for a newline already (a long line arrives in many
    // reads: each is searched once, not the whole line again)
    size_t scanned = 0;
    size_t lineno = 0;
    std::vector<char> buf(1 << 16);
    bool eof = false;
    while (!eof) {
        ssize_t n = ::read(0, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw DeviceError(std::string("cannot read stdin: ") + std::strerror(errno));
        if (n == 0) {
            eof = true;
            if (!pending.empty() && pending.back() != '\n') pending += '\n';
        } else {
            pending.append(buf.data(), static_cast<size_t>(n));
        }
        std::vector<Case> batch;
        std::string error;
        size_t start = 0, nl;
        while ((nl = pending.find('\n', std::max(start, scanned))) != std::string::npos) {
            std::string line = pending.substr(start, nl - start);
            start = nl + 1;
            lineno++;
            size_t first = line.find_first_not_of(" \t\r");
            if (first == std::string::npos || line[first] == '#') continue;
            try {
                Case cs = parse_case(line, "<stdin>", lineno);
                check_case(ins, cs, "<stdin>", true);
                batch.push_back(std::move(cs));
            } catch (const InputError &e) {
                error = e.what();
                break;
            }
        }
        pending.erase(0, start);
        scanned = error.empty() ? pending.size() : 0;
        if (!batch.empty()) {
            std::vector<const Case *> cases;
            for (const Case &c : batch) cases.push_back(&c);
            std::vector<uint64_t> d = run_cases(*dev, ins, cases, per_mma);
            std::string answers;
            for (uint64_t v : d) answers += "d=" + hex(v, family(ins, OP_D).width) + "\n";
            write_all(answers);
        }
        if (!error.empty()) throw InputError(error);
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        Options o = parse_args(argc, argv);
        if (o.list) return list();
        if (o.serve) return serve(o);
        return vectors(o);
    } catch (const InputError &e) {
        std::cerr << "mmac-capture: error: " << e.what() << '\n';
        return 2;
    } catch (const DeviceError &e) {
        std::cerr << "mmac-capture: error: " << e.what() << '\n';
        return 1;
    } catch (const std::exception &e) {
        std::cerr << "mmac-capture: error: " << e.what() << '\n';
        return 1;
    }
}
