// mmv.cpp: the capture kit's reading and writing of .mmv vector files and of the black-box
// protocol's request lines (the same case syntax; /work/shared/vectors/README.md and
// docs/infer.md), with errors that name file, line and column.
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "capture.h"

namespace capture {
namespace {

std::string at(const std::string &where, size_t line, size_t col) {
    return where + ":" + std::to_string(line) + ":" + std::to_string(col) + ": ";
}

bool is_hex(char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; }

uint64_t hex_value(char ch) {
    if (ch >= '0' && ch <= '9') return static_cast<uint64_t>(ch - '0');
    return static_cast<uint64_t>(std::tolower(static_cast<unsigned char>(ch)) - 'a' + 10);
}

// The storage bits of an operand's values (the .mmv digits of a value).
int format_bits(const Instr &ins, Operand op) { return family(ins, op).width; }

// What an operand's values are, for a message.
std::string field_format(const Instr &ins, Operand op) {
    if (op <= OP_D) return ins.types[op];
    return std::string("the scale factors, ") + ins.scale;
}

// A sparse case's pos=: strictly increasing columns below k, `kept` in each group of
// `span` (the j-th stored element in group j / kept), and whole units (the elements of one
// metadata field in adjacent columns, the first at a multiple of `unit`). The metadata
// can say nothing else.
void check_positions(const Instr &ins, const Case &cs, const std::string &here) {
    const Metadata &m = ins.meta;
    for (size_t j = 0; j < cs.pos.size(); j++) {
        uint64_t p = cs.pos[j];
        auto bad = [&](const std::string &why) {
            throw InputError(here + "`pos=` value " + std::to_string(j) + " (column " + std::to_string(p) +
                             "): " + why);
        };
        if (p >= static_cast<uint64_t>(ins.k)) bad("not below k = " + std::to_string(ins.k));
        if (j > 0 && p <= cs.pos[j - 1]) bad("the columns must increase");
        if (p / static_cast<uint64_t>(m.span) != j / static_cast<size_t>(m.kept))
            bad("each group of " + std::to_string(m.span) + " columns holds " + std::to_string(m.kept) +
                " stored elements, in order");
        size_t e = j % static_cast<size_t>(m.unit);
        if (p % static_cast<uint64_t>(m.unit) != e || (e > 0 && p != cs.pos[j - 1] + 1))
            bad("the stored elements go in adjacent runs of " + std::to_string(m.unit) +
                " from a multiple of " + std::to_string(m.unit));
    }
}

std::string trim(const std::string &s) {
    size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

}  // namespace

std::string hex(uint64_t v, int bits) {
    static const char *digits = "0123456789abcdef";
    std::string s;
    for (; v != 0; v >>= 4) s.insert(s.begin(), digits[v & 15]);
    size_t n = static_cast<size_t>(bits > 0 ? (bits + 3) / 4 : 1);
    if (s.size() < n) s.insert(0, n - s.size(), '0');
    return s;
}

Case parse_case(const std::string &text, const std::string &where, size_t line) {
    // tokens as mmac's lexer takes them, longest match first: `name=`, `,`, a hex run
    static const char *const names[] = {"c=", "a=", "b=", "sa=", "sb=", "pos=", "d="};
    Case cs;
    cs.line = line;
    std::vector<uint64_t> *fields[] = {nullptr, &cs.a, &cs.b, &cs.sa, &cs.sb, &cs.pos, nullptr};
    bool seen[7] = {};
    std::vector<uint64_t> single[7];
    int current = -1;
    bool expect_value = false;
    size_t i = 0;
    auto fail = [&](size_t col, const std::string &msg) {
        throw InputError(at(where, line, col) + msg);
    };
    while (i < text.size()) {
        char ch = text[i];
        if (ch == ' ' || ch == '\t' || ch == '\r') {
            i++;
            continue;
        }
        size_t col = i + 1;
        size_t run = i;
        while (run < text.size() && is_hex(text[run])) run++;
        int name = -1;
        size_t name_len = 0;
        for (int n = 0; n < 7; n++) {
            size_t len = std::strlen(names[n]);
            if (text.compare(i, len, names[n]) == 0 && len > name_len) {
                name = n;
                name_len = len;
            }
        }
        if (name >= 0 && name_len > run - i) {
            if (expect_value) fail(col, "expected a hex value");
            if (seen[name]) {
                std::string n(names[name]);
                fail(col, "`" + n + "` given twice");
            }
            seen[name] = true;
            cs.columns[name] = col;
            current = name;
            expect_value = true;
            i += name_len;
        } else if (run > i) {
            if (current < 0) fail(col, "a value before any `name=`");
            if (!expect_value) fail(col, "expected `,` or a new field");
            std::string digits = text.substr(i, run - i);
            size_t sig = digits.find_first_not_of('0');
            if (sig != std::string::npos && digits.size() - sig > 16)
                fail(col, "`" + shown(digits) + "` is wider than 64 bits");
            uint64_t v = 0;
            for (char d : digits) v = v << 4 | hex_value(d);
            std::vector<uint64_t> *dst = fields[current] ? fields[current] : &single[current];
            dst->push_back(v);
            if (current == 6) {
                cs.d_at = i;
                cs.d_len = run - i;
            }
            expect_value = false;
            i = run;
        } else if (ch == ',') {
            if (expect_value || current < 0) fail(col, "unexpected `,`");
            expect_value = true;
            i++;
        } else {
            size_t end = i + 1;
            while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
                   text[end] != ',')
                end++;
            fail(col, "unexpected `" + shown(text.substr(i, end - i)) + "`");
        }
    }
    if (expect_value)
        fail(text.find_last_not_of(" \t\r") + 2, "line ends where a hex value was expected");
    for (int n : {0, 6}) {
        if (!seen[n]) continue;
        if (single[n].size() != 1) fail(1, std::string("`") + names[n] + "` takes one value");
    }
    if (!seen[0]) fail(1, "missing `c=`");
    if (!seen[1]) fail(1, "missing `a=`");
    if (!seen[2]) fail(1, "missing `b=`");
    cs.c = single[0][0];
    if (seen[6]) {
        cs.has_d = true;
        cs.d = single[6][0];
    }
    return cs;
}

void check_case(const Instr &ins, const Case &cs, const std::string &where, bool request) {
    // the fields, in Case::columns' order
    enum { C, A, B, SA, SB, POS, D };
    // an error about a field points at it; one about a missing field at the line
    auto here = [&](int field) {
        return at(where, cs.line, cs.columns[field] ? cs.columns[field] : 1);
    };
    std::string name = ins.name;
    if (request && cs.has_d) throw InputError(here(D) + "a request has no `d=` (the box answers it)");
    if (!request && !cs.has_d) throw InputError(here(D) + "missing `d=`");
    const bool sparse = has(ins, OP_META), scaled = has(ins, OP_SA);
    if (!sparse && !cs.pos.empty())
        throw InputError(here(POS) + "`pos=` is for a sparse instruction; `" + name + "` is dense");
    if (sparse && cs.pos.empty())
        throw InputError(here(POS) + "missing `pos=` (the columns of a= in A's row; `" + name + "` is sparse)");
    if (!scaled && (!cs.sa.empty() || !cs.sb.empty()))
        throw InputError(here(cs.sa.empty() ? SB : SA) + "`sa=`/`sb=` are for a block-scaled instruction; `" +
                         name + "` takes no scale factors");
    auto count = [&](int field, const char *text, size_t got, int want, const char *what) {
        if (got != static_cast<size_t>(want))
            throw InputError(here(field) + "`" + text + "=` has " + std::to_string(got) + " values, expected " +
                             std::to_string(want) + " (" + what + " of " + name + ")");
    };
    count(A, "a", cs.a.size(), ins.stored, sparse ? "the stored elements, k / 2," : "k");
    count(B, "b", cs.b.size(), ins.k, "k");
    if (sparse) {
        count(POS, "pos", cs.pos.size(), ins.stored, "the stored elements, k / 2,");
        check_positions(ins, cs, here(POS));
    }
    if (scaled) {
        count(SA, "sa", cs.sa.size(), ins.scales, "the scale factors per row");
        count(SB, "sb", cs.sb.size(), ins.scales, "the scale factors per column");
    }
    auto fits = [&](int field, const char *text, Operand op, uint64_t v) {
        int bits = format_bits(ins, op);
        if (bits < 64 && (v >> bits) != 0)
            throw InputError(here(field) + text + " value " + hex(v, 0) + " does not fit `" +
                             field_format(ins, op) + "` (" + std::to_string(bits) + " bits)");
    };
    fits(C, "c", OP_C, cs.c);
    for (uint64_t v : cs.a) fits(A, "a", OP_A, v);
    for (uint64_t v : cs.b) fits(B, "b", OP_B, v);
    for (uint64_t v : cs.sa) fits(SA, "sa", OP_SA, v);
    for (uint64_t v : cs.sb) fits(SB, "sb", OP_SB, v);
    if (cs.has_d) fits(D, "d", OP_D, cs.d);
}

Mmv read_mmv(const std::string &path, const Instr *&ins) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot read: " + std::strerror(errno));
    Mmv mmv;
    mmv.path = path;
    std::string line;
    while (std::getline(in, line)) mmv.lines.push_back(line);
    if (in.bad()) throw InputError(path + ": read error");
    std::string types, k, scale, sparse;
    size_t types_line = 0, k_line = 0, scale_line = 0, sparse_line = 0, instr_line = 0;
    bool data_seen = false;
    for (size_t i = 0; i < mmv.lines.size(); i++) {
        const std::string &text = mmv.lines[i];
        std::string t = trim(text);
        size_t lineno = i + 1;
        if (t.empty()) continue;
        if (t[0] == '#') {
            std::string h = trim(t.substr(1));
            if (h.rfind("mmv ", 0) == 0 && trim(h.substr(4)) != "1")
                throw InputError(at(path, lineno, 1) + "`# " + h +
                                 "`: the capture kit reads version 1 of the format");
            size_t colon = h.find(':');
            if (colon == std::string::npos) continue;
            std::string key = trim(h.substr(0, colon)), value = trim(h.substr(colon + 1));
            std::string *slot = nullptr;
            size_t *slot_line = nullptr;
            if (key == "instruction") slot = &mmv.instruction, slot_line = &instr_line;
            if (key == "types") slot = &types, slot_line = &types_line;
            if (key == "k") slot = &k, slot_line = &k_line;
            if (key == "scale") slot = &scale, slot_line = &scale_line;
            if (key == "sparse") slot = &sparse, slot_line = &sparse_line;
            if (!slot) continue;
            if (data_seen)
                throw InputError(at(path, lineno, 1) + "`# " + key +
                                 ":` after the first case; the header comes first");
            if (!slot->empty() && *slot != value)
                throw InputError(at(path, lineno, 1) + "a second `# " + key + ":` header (`" +
                                 value + "`, after `" + *slot + "`)");
            *slot = value;
            *slot_line = lineno;
            continue;
        }
        data_seen = true;
        mmv.cases.push_back(parse_case(text, path, lineno));
        mmv.case_line_index.push_back(i);
    }
    if (!ins) {
        if (mmv.instruction.empty())
            throw InputError(path + ": no `# instruction:` header; name the instruction with --instr");
        ins = find_instruction(mmv.instruction);
        if (!ins)
            throw InputError(at(path, instr_line, 1) + "`" + shown(mmv.instruction) +
                             "` is not an instruction of the capture kit (nearest: " +
                             suggest(mmv.instruction) + "; `mmac-capture --list` lists them)");
    } else if (!mmv.instruction.empty() && mmv.instruction != ins->name) {
        throw InputError(at(path, instr_line, 1) + "the file is for `" + mmv.instruction +
                         "`, not `" + ins->name + "`");
    }
    if (!k.empty() && k != std::to_string(ins->k))
        throw InputError(at(path, k_line, 1) + "`# k: " + k + "`, but " + ins->name + " has k = " +
                         std::to_string(ins->k));
    if (!types.empty()) {
        std::string want = std::string("a=") + ins->types[0] + " b=" + ins->types[1] +
                           " c=" + ins->types[2] + " d=" + ins->types[3];
        std::istringstream got(types), exp(want);
        std::string g, e;
        bool same = true;
        while (true) {
            bool more_g = static_cast<bool>(got >> g), more_e = static_cast<bool>(exp >> e);
            if (more_g != more_e || (more_g && g != e)) same = false;
            if (!more_g || !more_e) break;
        }
        if (!same)
            throw InputError(at(path, types_line, 1) + "`# types: " + types + "`, but " +
                             ins->name + " has " + want);
    }
    if (!scale.empty() && scale != ins->scale)
        throw InputError(at(path, scale_line, 1) + "`# scale: " + scale + "`, but " + ins->name +
                         (has(*ins, OP_SA) ? std::string(" has `") + ins->scale + "`" : " is not block-scaled"));
    if (!sparse.empty() && !has(*ins, OP_META))
        throw InputError(at(path, sparse_line, 1) + "`# sparse: " + sparse + "`, but " + ins->name +
                         " is dense");
    if (mmv.cases.empty()) throw InputError(path + ": no cases");
    for (const Case &cs : mmv.cases) check_case(*ins, cs, path, false);
    return mmv;
}

std::string write_mmv(const Mmv &mmv, const Instr &ins, const std::vector<uint64_t> &d,
                      const std::vector<std::string> &notes) {
    std::vector<std::string> lines = mmv.lines;
    for (size_t i = 0; i < mmv.cases.size(); i++) {
        const Case &cs = mmv.cases[i];
        std::string &text = lines[mmv.case_line_index[i]];
        text.replace(cs.d_at, cs.d_len, hex(d[i], family(ins, OP_D).width));
    }
    // a capture captured again: its earlier provenance lines (`# captured:`, `# capture:`)
    // give way to this one's
    size_t first_case = mmv.case_line_index.empty() ? lines.size() : mmv.case_line_index[0];
    std::vector<std::string> kept;
    for (size_t i = 0; i < lines.size(); i++) {
        std::string t = trim(lines[i]);
        bool provenance = i < first_case && t.rfind("#", 0) == 0 &&
                          (trim(t.substr(1)).rfind("captured:", 0) == 0 ||
                           trim(t.substr(1)).rfind("capture:", 0) == 0);
        if (!provenance) kept.push_back(lines[i]);
    }
    lines = kept;
    // the notes go after `# source:` (else after the last header line before any case)
    size_t insert = 0;
    bool found = false;
    for (size_t i = 0; i < lines.size() && !found; i++) {
        std::string t = trim(lines[i]);
        if (!t.empty() && t[0] != '#') break;
        if (t.rfind("#", 0) == 0 && trim(t.substr(1)).rfind("source:", 0) == 0) {
            insert = i + 1;
            found = true;
        } else if (t.rfind("#", 0) == 0 && trim(t.substr(1)).find(':') != std::string::npos) {
            insert = i + 1;
        }
    }
    std::vector<std::string> block;
    for (const std::string &n : notes) block.push_back("# " + n);
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(insert), block.begin(), block.end());
    std::string out;
    for (const std::string &l : lines) {
        out += l;
        out += '\n';
    }
    return out;
}

}  // namespace capture
