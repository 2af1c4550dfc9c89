// Testbench for dp4.sv: every case of a `mmac gen --format hex` file, then random inputs
// checked against the golden model (the spec compiled by `mmac compile --emit obj`, called
// through DPI-C). The first mismatch is reported with the `mmac run --trace` command that
// explains the expected result; the run ends with `N passed, M failed` and exits non-zero
// when anything failed.
//
// Plusargs: +vectors=FILE +count=N (the hex file and its number of cases),
// +random=N (random cases, default 100000), +seed=S.
// Parameter F: the datapath's aligner width (run.sh passes F = 19 for the broken variant).
module tb #(
    parameter int F = 20
);
  import "DPI-C" function int unsigned golden_dot(
    input int unsigned c,
    input int unsigned a,
    input int unsigned b
  );

  localparam int WORD = 128;  // c[127:96] a0..a3[95:64] b0..b3[63:32] d[31:0]
  localparam int MAX_VECTORS = 1 << 16;
  localparam string SPEC = "specs/examples/dp4.mma";
  localparam string INSTR = "dp4.f32.e4m3.e4m3.f32";

  logic [WORD-1:0] vectors[MAX_VECTORS];
  logic [31:0] c, d;
  logic [31:0] a, b;  // four e4m3 each, lane 0 in the low byte

  dp4 #(.F(F)) dut (.c(c), .a(a), .b(b), .d(d));

  int passed = 0, failed = 0;

  // Apply one case; compare with `want`; report the first mismatch.
  task automatic check(input string origin, input logic [31:0] want);
    #1;
    if (d === want) begin
      passed++;
    end else begin
      failed++;
      if (failed == 1) begin
        $display("MISMATCH (%s): d=%08x, the spec gives d=%08x", origin, d, want);
        $display("  explain: mmac run %s --instr %s --c %08x --a %02x,%02x,%02x,%02x --b %02x,%02x,%02x,%02x --trace",
                 SPEC, INSTR, c, a[7:0], a[15:8], a[23:16], a[31:24], b[7:0], b[15:8],
                 b[23:16], b[31:24]);
      end
    end
  endtask

  // A random f32 c: often near the products' range, sometimes any encoding.
  function automatic logic [31:0] random_c();
    int unsigned pick = $urandom % 8;
    if (pick == 0) return $urandom;
    if (pick == 1) return 0;
    return {1'($urandom), 8'(112 + $urandom % 32), 23'($urandom)};
  endfunction

  initial begin
    string path;
    int count = 0, random = 100000, seed = 1;
    if ($value$plusargs("vectors=%s", path)) begin
      if (!$value$plusargs("count=%d", count)) $fatal(1, "+vectors needs +count");
      if (count > MAX_VECTORS) $fatal(1, "more than %0d vectors", MAX_VECTORS);
      $readmemh(path, vectors, 0, count - 1);
    end
    void'($value$plusargs("random=%d", random));
    void'($value$plusargs("seed=%d", seed));
    void'($urandom(seed));
    for (int i = 0; i < count; i++) begin
      logic [WORD-1:0] v = vectors[i];
      c = v[127:96];
      for (int j = 0; j < 4; j++) begin
        a[8*j+:8] = v[95-8*j-:8];
        b[8*j+:8] = v[63-8*j-:8];
      end
      check($sformatf("vector %0d", i), v[31:0]);
    end
    for (int i = 0; i < random; i++) begin
      a = $urandom;
      b = $urandom;
      c = random_c();
      check($sformatf("random %0d", i), golden_dot(c, a, b));
    end
    $display("%0d passed, %0d failed", passed, failed);
    if (failed != 0) $fatal(1, "the datapath disagrees with the spec");
    $finish;
  end
endmodule
