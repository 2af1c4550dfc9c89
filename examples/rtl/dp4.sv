// A 4-term FP8 dot-product-add unit, written from specs/examples/dp4.mma:
//
//   uses t_fdpa(F = 20, L = 4, e_zero = -133, rho = nearest_even)
//
//   d = round_f32_RNE( c' + sum_i (a_i * b_i)' )
//
// where every term (the exact products and c) is aligned to the largest term exponent r
// and truncated toward zero to F fraction bits below it (the ' above); a zero term takes
// exponent E_ZERO in that search. The aligned sum is exact. Rounding keeps subnormal
// results, overflows to infinity, and gives +0 for a zero sum. Any NaN input gives the
// canonical NaN 7fffffff; an infinite c passes through (e4m3 has no infinity).
//
// Combinational and synthesizable: no loops with data-dependent bounds, widths fixed by
// the parameters. `F` is the aligner's width; the testbench instantiates it with F - 1 to
// show that a one-bit-narrower aligner is caught.
module dp4 #(
    parameter int F = 20,
    parameter int E_ZERO = -133
) (
    input  logic [31:0] c,
    input  logic [31:0] a,  // a0 in bits 7:0, ..., a3 in bits 31:24
    input  logic [31:0] b,  // likewise
    output logic [31:0] d
);
  // ---- decode -----------------------------------------------------------------------
  // e4m3 (OCP FN): bias 7, no infinity, NaN = S.1111.111, subnormals at exponent -6.
  // (One function per field: Yosys reads no function that returns a struct.)
  function automatic logic e4m3_nan(input logic [7:0] x);
    e4m3_nan = x[6:0] == 7'h7f;
  endfunction
  function automatic logic e4m3_zero(input logic [7:0] x);
    e4m3_zero = x[6:0] == 7'h00;
  endfunction
  // unbiased; subnormals take the minimum exponent
  function automatic logic signed [9:0] e4m3_exponent(input logic [7:0] x);
    e4m3_exponent = (x[6:3] == 0) ? -10'sd6 : $signed({6'b0, x[6:3]}) - 10'sd7;
  endfunction
  // with the implicit bit, 3 fraction bits
  function automatic logic [3:0] e4m3_significand(input logic [7:0] x);
    e4m3_significand = {x[6:3] != 0, x[2:0]};
  endfunction

  // ---- products and c as terms: sign, exponent, significand with its fraction bits ---
  localparam int TERMS = 5;  // four products, then c
  localparam int SIG = 24;  // the widest significand (c's)
  logic        term_sign [TERMS];
  logic        term_zero [TERMS];
  logic signed [ 9:0] term_exp [TERMS];  // the exponent in the max search
  logic        [SIG-1:0] term_sig [TERMS];
  logic signed [ 9:0] term_lsb [TERMS];  // the exponent of the significand's last bit
  logic        any_nan, c_inf;

  always_comb begin
    any_nan = 1'b0;
    for (int i = 0; i < 4; i++) begin
      any_nan |= e4m3_nan(a[8*i+:8]) | e4m3_nan(b[8*i+:8]);
      term_sign[i] = a[8*i+7] ^ b[8*i+7];
      term_zero[i] = e4m3_zero(a[8*i+:8]) | e4m3_zero(b[8*i+:8]);
      // exact product: 8-bit significand, 6 fraction bits, exponent ea + eb
      term_sig[i] = SIG'(e4m3_significand(a[8*i+:8])) * SIG'(e4m3_significand(b[8*i+:8]));
      term_exp[i] = term_zero[i] ? 10'(E_ZERO) :
          e4m3_exponent(a[8*i+:8]) + e4m3_exponent(b[8*i+:8]);
      term_lsb[i] = e4m3_exponent(a[8*i+:8]) + e4m3_exponent(b[8*i+:8]) - 10'sd6;
    end
    // c: f32, bias 127, subnormals at exponent -126
    any_nan |= c[30:23] == 8'hff && c[22:0] != 0;
    c_inf = c[30:23] == 8'hff && c[22:0] == 0;
    term_sign[4] = c[31];
    term_zero[4] = c[30:0] == 0;
    term_sig[4] = {c[30:23] != 0, c[22:0]};
    term_exp[4] = term_zero[4] ? 10'(E_ZERO) :
        (c[30:23] == 0) ? -10'sd126 : $signed({2'b0, c[30:23]}) - 10'sd127;
    term_lsb[4] = ((c[30:23] == 0) ? -10'sd126 : $signed({2'b0, c[30:23]}) - 10'sd127) - 10'sd23;
  end

  // ---- align: the largest exponent, then every term truncated to F bits below it -----
  logic signed [9:0] r;
  always_comb begin
    r = term_exp[0];
    for (int i = 1; i < TERMS; i++) if (term_exp[i] > r) r = term_exp[i];
  end

  // Each aligned term is a multiple of 2^(r - F); its magnitude is below 2^(F + 2)
  // (a product's significand is below 4), so the sum of five fits ACC bits with sign.
  localparam int ACC = F + 6;
  logic signed [ACC-1:0] sum;
  always_comb begin
    sum = '0;
    for (int i = 0; i < TERMS; i++) begin
      logic signed [10:0] shift;  // left shift of the significand onto the 2^(r-F) grid
      logic [ACC-1:0] magnitude;
      shift = 11'(term_lsb[i]) - 11'(r) + 11'(F);
      if (term_zero[i]) magnitude = '0;
      else if (shift >= 0) magnitude = ACC'(term_sig[i]) << shift;
      else if (-shift >= 11'(SIG)) magnitude = '0;
      else magnitude = ACC'(term_sig[i]) >> (-shift);  // truncation toward zero
      sum += term_sign[i] ? -$signed(magnitude) : $signed(magnitude);
    end
  end

  // ---- normalise: round |sum| * 2^(r - F) to f32, nearest even --------------------------
  localparam int W = ACC + 1;  // one spare bit for the rounding's carry
  logic [ACC-1:0] mag;
  logic           neg;
  logic [7:0]     lead;  // position of the leading one of mag
  logic signed [11:0] e;  // unbiased exponent of the result before rounding
  logic signed [11:0] q;  // right shift of mag onto the result's quantum
  logic [W-1:0] whole, rest, half, kept, sig;
  logic signed [11:0] exp_out;
  logic [31:0] rounded;

  always_comb begin
    neg = sum < 0;
    mag = neg ? ACC'(-sum) : ACC'(sum);
    lead = '0;
    for (int i = 0; i < ACC; i++) if (mag[i]) lead = 8'(i);
    e = 12'(r) - 12'(F) + 12'({4'b0, lead});
    // the quantum: 2^(e - 23), but never below 2^-149 (subnormal results)
    q = ((e < -12'sd126) ? -12'sd149 : e - 12'sd23) - (12'(r) - 12'(F));
    whole = '0;
    rest = '0;
    half = '0;
    if (q <= 0) begin
      kept = W'(mag) << (-q);
    end else if (q > 12'(W)) begin
      kept = '0;  // below half the quantum
    end else begin
      whole = W'(mag) >> q;
      rest = W'(mag) - (whole << q);
      half = W'(1) << (q - 1);
      kept = whole + W'(rest > half || (rest == half && whole[0]));
    end
    // kept is the result's significand (with the implicit bit when normal, possibly
    // carried to 2^24); encode it
    sig = kept;
    exp_out = (e < -12'sd126) ? -12'sd126 : e;
    if (sig >= W'(1) << 24) begin  // the rounding carried
      sig = sig >> 1;
      exp_out = exp_out + 1;
    end
    if (kept == 0) rounded = 32'h0000_0000;  // a zero result is positive
    else if (exp_out > 12'sd127) rounded = {neg, 8'hff, 23'h0};  // overflow: infinity
    else if (sig < W'(1) << 23) rounded = {neg, 8'h00, sig[22:0]};  // subnormal
    else rounded = {neg, 8'(exp_out + 12'sd127), sig[22:0]};
  end

  assign d = any_nan ? 32'h7fff_ffff : c_inf ? c : rounded;
endmodule
