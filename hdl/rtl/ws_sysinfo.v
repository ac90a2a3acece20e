`default_nettype none

// ws_sysinfo: the system identity block in register slot 0 (hdl/regmap/sysinfo.toml).
//
// It presents build-time constants (build hash, clock, memory sizes, populated slots) so the
// host and firmware can check what they talk to, a scratch word for bus tests, and the soft
// reset: writing the key 0x52535421 ("RST!") to RESET raises `soft_reset` for one cycle. ws_soc
// stretches that pulse and uses it to reset the core and the peripherals, but not the debug
// module, so an attached debugger survives a firmware-initiated reset.
module ws_sysinfo #(
    parameter [31:0] BUILD_HASH = 32'h0,          // first 32 bits of the HDL source hash
    parameter [31:0] CLK_HZ = 32'd50_000_000,     // core clock frequency in Hz
    parameter [31:0] ROM_BYTES = 32'd8192,        // boot ROM size in bytes
    parameter [31:0] RAM_BYTES = 32'd262144,      // main RAM size in bytes
    parameter [31:0] SLOT_MASK = 32'h0000_001f    // bit n: register slot n holds a block
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        reg_req,
    input  wire        reg_we,
    input  wire [11:0] reg_addr,
    input  wire [31:0] reg_wdata,
    input  wire [3:0]  reg_be,
    output wire [31:0] reg_rdata,

    // One-cycle pulse: software asked for a core and peripheral reset.
    output wire        soft_reset
);

    // "RST!" in ASCII, most significant byte first (sysinfo.toml RESET).
    localparam [31:0] RESET_KEY = 32'h5253_5421;

    initial begin
        if (SLOT_MASK[0] == 1'b0) begin
            $error("ws_sysinfo: SLOT_MASK must include slot 0 (sysinfo itself)");
        end
    end

    wire [31:0] scratch_value;
    wire        scratch_we;
    wire [31:0] reset_key;
    wire        reset_we;

    reg soft_reset_reg, soft_reset_next;

    ws_sysinfo_csr ws_sysinfo_csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .build_hash_hash_i(BUILD_HASH),
        .clk_hz_hz_i(CLK_HZ),
        .rom_bytes_bytes_i(ROM_BYTES),
        .ram_bytes_bytes_i(RAM_BYTES),
        .slots_mask_i(SLOT_MASK),
        .scratch_value(scratch_value),
        .scratch_we(scratch_we),
        .reset_key(reset_key),
        .reset_we(reset_we)
    );

    // Only a full-word write of the key counts, so a stray byte store cannot reset the SoC.
    always @* begin
        soft_reset_next = reset_we && (reg_be == 4'hf) && (reset_key == RESET_KEY);
    end

    always @(posedge clk) begin
        soft_reset_reg <= soft_reset_next;

        if (rst) begin
            soft_reset_reg <= 1'b0;
        end
    end

    assign soft_reset = soft_reset_reg;

    // SCRATCH lives entirely inside the CSR block.
    wire _unused_ok = &{1'b0, scratch_value, scratch_we};

endmodule

`default_nettype wire
