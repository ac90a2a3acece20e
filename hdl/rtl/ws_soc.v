`default_nettype none

// ws_soc: the weightstream SoC, the control plane every board (and the Verilator model) carries.
//
// A CV32E40P (RV32IMC, no FPU, no PULP extensions) runs the no_std firmware. The riscv-dbg debug
// module (dm_top) and its JTAG transport (dmi_jtag) give probe-rs and OpenOCD standard
// RISC-V Debug 0.13 access: halt, abstract commands, program buffer and system-bus access.
// Two ws_obi_xbar instances join the core's instruction port, its data port and the debug
// system-bus master to the boot ROM, the RAM, the debug module and the peripheral bus;
// ws_periph_bus fans out to the register blocks (sysinfo, timer, UART, GPIO, host link, link
// engine, MemoryX and its data mover).
// The memory map, bus contract and port list are specified in docs/soc.md and
// hdl/regmap/soc.toml.
//
// Resets. `rst` (active high, synchronous) is the power-on reset of the whole SoC. It is
// registered once and drives the debug module, which wants an active-low reset that is clean
// of combinational glitches (dm_top: "connect PoR here, not the system reset"). The core and
// the register blocks get a second, registered reset that also asserts while the debugger
// holds dmcontrol.ndmreset (RISC-V Debug 0.13 §3.2) and for SOFT_RESET_CYCLES after software
// writes the sysinfo RESET key. The crossbars, ROM and RAM stay out of that reset, so RAM
// contents survive and a system-bus access in flight still completes.
module ws_soc #(
    parameter CLK_HZ = 50_000_000,             // core clock frequency in Hz (sysinfo CLK_HZ)
    parameter [31:0] BUILD_HASH = 32'h0,       // first 32 bits of the HDL source hash (sysinfo)
    parameter RAM_BYTES = 256 * 1024,          // main RAM size; a power of two, at most 256 KiB
    parameter BOOTROM_INIT = "bootrom.hex",    // $readmemh image for the boot ROM
    parameter [31:0] JTAG_IDCODE = 32'h1000_5a57, // JTAG IDCODE; bit 0 is 1 (IEEE 1149.1)
    parameter LINK_DMA_BYTES = 262144,         // link engine DMA RAM (bulk-channel windows); FPGA tops size it to their block RAM
    parameter MX_STORE_BYTES = 1 << 20,        // MemoryX weight store (the simulation store, ws_mx_block)
    parameter MESH_P = 2,                      // wafer mesh side (MESH_P x MESH_P PEs); 0: none
    parameter MX_FWD_WORDS = 65536,            // MemoryX's forward buffer (docs/mesh-array.md "Forwarding"); 0: none
    parameter WAFERS = 2                       // wafer meshes on SwarmX, 1..4 (slots 25 .. 25 + WAFERS - 1)
) (
    input  wire       clk,
    input  wire       rst,

    // JTAG to the riscv-dbg debug transport module.
    input  wire       jtag_tck,
    input  wire       jtag_tms,
    input  wire       jtag_tdi,
    input  wire       jtag_trst_n,
    output wire       jtag_tdo,

    output wire       uart_tx,
    input  wire       uart_rx,

    output wire [7:0] gpio_out,
    input  wire [7:0] gpio_in,

    // Host link, host to board.
    input  wire       s_link_valid,
    output wire       s_link_ready,
    input  wire [7:0] s_link_data,

    // Host link, board to host.
    output wire       m_link_valid,
    input  wire       m_link_ready,
    output wire [7:0] m_link_data,

    // Link engine PHY words (link protocol v2, docs/link.md), host to board and back; a
    // board's PHY adapter (boards/*/rtl) or the simulator drives them. Stream byte 0 is [7:0].
    input  wire        s_phy_valid,
    output wire        s_phy_ready,
    input  wire [31:0] s_phy_data,
    output wire        m_phy_valid,
    input  wire        m_phy_ready,
    output wire [31:0] m_phy_data,

    // CV32E40P sleeps in WFI.
    output wire       core_sleep
);

    // Memory map (hdl/regmap/soc.toml).
    localparam [31:0] BOOTROM_BASE = 32'h0000_0000;
    localparam ROM_BYTES = 8 * 1024;
    localparam [31:0] DEBUG_BASE = 32'h0010_0000;
    localparam [31:0] RAM_BASE = 32'h1000_0000;
    localparam [31:0] PERIPH_BASE = 32'h2000_0000;

    localparam [31:0] ROM_BYTES_WORD = ROM_BYTES;
    localparam [31:0] RAM_BYTES_WORD = RAM_BYTES;
    localparam [31:0] CLK_HZ_WORD = CLK_HZ;
    localparam [31:0] ROM_MASK = ~(ROM_BYTES_WORD - 32'd1);
    localparam [31:0] RAM_MASK = ~(RAM_BYTES_WORD - 32'd1);
    localparam [31:0] DEBUG_MASK = 32'hffff_f000;
    localparam [31:0] PERIPH_MASK = 32'hfff0_0000;
    localparam ROM_ADDR_WIDTH = $clog2(ROM_BYTES);
    localparam RAM_ADDR_WIDTH = $clog2(RAM_BYTES);

    // Debug module entry points: the debug ROM's halt and exception addresses
    // (dm_pkg.sv HaltAddress 0x800, ExceptionAddress 0x808) inside the debug region.
    localparam [31:0] DM_HALT_ADDR = DEBUG_BASE + 32'h800;
    localparam [31:0] DM_EXCEPTION_ADDR = DEBUG_BASE + 32'h808;

    // hartinfo as PULP SoCs wire it for CV32E40P (RISC-V Debug 0.13 §3.12.3): data registers
    // shadowed in memory (dataaccess=1) at dm::DataAddr 0x380, dm::DataCount 2 words, two
    // dscratch CSRs. The values mirror dm_pkg.sv; they are spelled out because this file must
    // also parse with plain `read_verilog -sv`, which cannot import the package. Caveat: the spec
    // reads dataaddr as x0-relative, but our debug module sits at 0x0010_0000, so the words are
    // really at 0x0010_0380; debuggers only use that address for scratch memory (FPU or vector
    // register access), which an RV32IMC hart never needs.
    localparam [11:0] DM_DATA_ADDR = 12'h380;
    localparam [3:0] DM_DATA_COUNT = 4'd2;
    localparam [31:0] HARTINFO = {8'h00, 4'd2, 3'b000, 1'b1, DM_DATA_COUNT, DM_DATA_ADDR};

    // CV32E40P interrupt lines (soc.toml [[irq]]; CV32E40P user manual, "Interrupts").
    localparam IRQ_TIMER = 7;
    localparam IRQ_UART_RX = 16;
    localparam IRQ_HOSTLINK_RX = 17;
    localparam IRQ_LINK_RX = 18;
    localparam IRQ_SWARM = 19;

    // Register-block slots; bit n of SLOT_MASK is set when slot n holds a block.
    localparam NUM_SLOTS = 25 + WAFERS;
    localparam [31:0] SLOT_MASK = 32'h0107_011f | ((MESH_P > 0) ? (((32'd1 << WAFERS) - 32'd1) << 25) : 32'd0);
    localparam SLOT_LINK = 8;
    localparam SLOT_MX = 16;
    localparam SLOT_MXDMA = 17;
    localparam SLOT_TRACE = 18;
    localparam SLOT_SWARM = 24;
    localparam SLOT_MESH = 25;

    // Core and peripheral reset length after a software reset request.
    localparam SOFT_RESET_CYCLES = 16;

    // Two crossbars (ws_obi_xbar). CV32E40P has combinational paths from data_gnt to
    // instr_req (LSU ready -> EX/ID ready -> controller), and any arbiter that lets the two
    // ports compete for one slave makes each gnt depend on the other port's req: a
    // combinational loop. So fetch gets its own crossbar, and the boot ROM and RAM give it their
    // own port A. The one slave both sides need is the debug module: the core fetches the debug
    // ROM and program buffer from it and loads/stores its data words (execution-based debug,
    // RISC-V Debug 0.13 appendix A.2). It is shared by time slots: even cycles belong to the
    // fetch crossbar, odd cycles to the data crossbar. Each side's gnt then depends only on a
    // register, at the cost of up to one wait cycle per debug-module access.
    //
    // Fetch crossbar: one master (core instruction port).
    localparam FI_NUM_S = 3;
    localparam FI_ROM = 0;
    localparam FI_RAM = 1;
    localparam FI_DEBUG = 2;
    localparam [FI_NUM_S*32-1:0] FI_BASE = {DEBUG_BASE, RAM_BASE, BOOTROM_BASE};
    localparam [FI_NUM_S*32-1:0] FI_MASK = {DEBUG_MASK, RAM_MASK, ROM_MASK};
    // Fetch never writes; marking every slave read-only keeps port A of the RAM read-only.
    localparam [FI_NUM_S-1:0] FI_READ_ONLY = 3'b111;

    // Data crossbar: masters 0 core data port, 1 debug system-bus access.
    localparam D_NUM_M = 2;
    localparam D_CORE = 0;
    localparam D_SBA = 1;
    localparam D_NUM_S = 4;
    localparam D_ROM = 0;
    localparam D_RAM = 1;
    localparam D_DEBUG = 2;
    localparam D_PERIPH = 3;
    localparam [D_NUM_S*32-1:0] D_BASE = {PERIPH_BASE, DEBUG_BASE, RAM_BASE, BOOTROM_BASE};
    localparam [D_NUM_S*32-1:0] D_MASK = {PERIPH_MASK, DEBUG_MASK, RAM_MASK, ROM_MASK};
    // Writes to the boot ROM decode as unmapped.
    localparam [D_NUM_S-1:0] D_READ_ONLY = 4'b0001;

    initial begin
        if (JTAG_IDCODE[0] != 1'b1) $error("ws_soc: JTAG_IDCODE bit 0 must be 1 (IEEE 1149.1)");
        if (WAFERS < 1 || WAFERS > 4) $error("ws_soc: WAFERS must be 1..4 (SwarmX's 4 ports, slots 25..28)");
        if (RAM_BYTES < 8 || (RAM_BYTES & (RAM_BYTES - 1)) != 0 || RAM_BYTES > 256 * 1024) begin
            $error("ws_soc: RAM_BYTES must be a power of two <= 256 KiB (soc.toml ram region)");
        end
    end

    // ---------------------------------------------------------------- resets

    reg  sys_rst_reg;
    reg  soc_rst_reg, soc_rst_next;
    reg  [4:0] soft_reset_count_reg, soft_reset_count_next;

    wire ndmreset;
    wire soft_reset;

    always @* begin
        soft_reset_count_next = soft_reset_count_reg;
        if (soft_reset) begin
            soft_reset_count_next = SOFT_RESET_CYCLES[4:0];
        end else if (soft_reset_count_reg != 5'd0) begin
            soft_reset_count_next = soft_reset_count_reg - 5'd1;
        end

        soc_rst_next = sys_rst_reg || ndmreset || soft_reset || (soft_reset_count_reg != 5'd0);
    end

    always @(posedge clk) begin
        sys_rst_reg <= rst;
        soc_rst_reg <= soc_rst_next;
        soft_reset_count_reg <= soft_reset_count_next;

        if (sys_rst_reg) begin
            soft_reset_count_reg <= 5'd0;
        end
    end

    wire dm_rst_n = !sys_rst_reg;
    wire core_rst_n = !soc_rst_reg;
    wire periph_rst = soc_rst_reg;

    // ---------------------------------------------------------------- core

    wire        core_instr_req;
    wire        core_instr_gnt;
    wire        core_instr_rvalid;
    wire [31:0] core_instr_addr;
    wire [31:0] core_instr_rdata;

    wire        core_data_req;
    wire        core_data_gnt;
    wire        core_data_rvalid;
    wire        core_data_we;
    wire [3:0]  core_data_be;
    wire [31:0] core_data_addr;
    wire [31:0] core_data_wdata;
    wire [31:0] core_data_rdata;

    wire        irq_timer;
    wire        irq_uart;
    wire        irq_hostlink;
    wire        irq_link;
    wire        irq_swarm;
    wire [31:0] core_irq;

    wire        core_irq_ack;
    wire [4:0]  core_irq_id;
    wire        debug_req;
    wire        debug_havereset;
    wire        debug_running;
    wire        debug_halted;

    assign core_irq = (32'd1 << IRQ_TIMER) & {32{irq_timer}}
        | (32'd1 << IRQ_UART_RX) & {32{irq_uart}}
        | (32'd1 << IRQ_HOSTLINK_RX) & {32{irq_hostlink}}
        | (32'd1 << IRQ_LINK_RX) & {32{irq_link}}
        | (32'd1 << IRQ_SWARM) & {32{irq_swarm}};

    cv32e40p_top #(
        .COREV_PULP(0),
        .COREV_CLUSTER(0),
        .FPU(0),
        .ZFINX(0),
        .NUM_MHPMCOUNTERS(1)
    ) core_inst (
        .clk_i(clk),
        .rst_ni(core_rst_n),
        .pulp_clock_en_i(1'b1),
        .scan_cg_en_i(1'b0),
        // Boot in the ROM; mtvec starts at 0 and firmware installs its own trap vector.
        .boot_addr_i(BOOTROM_BASE),
        .mtvec_addr_i(32'h0000_0000),
        .dm_halt_addr_i(DM_HALT_ADDR),
        .hart_id_i(32'h0000_0000),
        .dm_exception_addr_i(DM_EXCEPTION_ADDR),
        .instr_req_o(core_instr_req),
        .instr_gnt_i(core_instr_gnt),
        .instr_rvalid_i(core_instr_rvalid),
        .instr_addr_o(core_instr_addr),
        .instr_rdata_i(core_instr_rdata),
        .data_req_o(core_data_req),
        .data_gnt_i(core_data_gnt),
        .data_rvalid_i(core_data_rvalid),
        .data_we_o(core_data_we),
        .data_be_o(core_data_be),
        .data_addr_o(core_data_addr),
        .data_wdata_o(core_data_wdata),
        .data_rdata_i(core_data_rdata),
        .irq_i(core_irq),
        .irq_ack_o(core_irq_ack),
        .irq_id_o(core_irq_id),
        .debug_req_i(debug_req),
        .debug_havereset_o(debug_havereset),
        .debug_running_o(debug_running),
        .debug_halted_o(debug_halted),
        .fetch_enable_i(1'b1),
        .core_sleep_o(core_sleep)
    );

    // ---------------------------------------------------------------- debug

    // DMI request {addr[6:0], op[1:0], data[31:0]} and response {data[31:0], resp[1:0]}, as the
    // packed structs dm::dmi_req_t and dm::dmi_resp_t.
    wire [40:0] dmi_req;
    wire        dmi_req_valid;
    wire        dmi_req_ready;
    wire [33:0] dmi_resp;
    wire        dmi_resp_valid;
    wire        dmi_resp_ready;
    wire        dmi_rst_n;
    wire        jtag_tdo_oe;
    wire        dmactive;

    wire        dm_slave_req;
    wire        dm_slave_we;
    wire [31:0] dm_slave_addr;
    wire [3:0]  dm_slave_be;
    wire [31:0] dm_slave_wdata;
    wire [31:0] dm_slave_rdata;

    wire        sba_req;
    wire [31:0] sba_addr;
    wire        sba_we;
    wire [31:0] sba_wdata;
    wire [3:0]  sba_be;
    wire        sba_gnt;
    wire        sba_rvalid;
    wire [31:0] sba_rdata;

    dmi_jtag #(
        .IdcodeValue(JTAG_IDCODE)
    ) dmi_jtag_inst (
        .clk_i(clk),
        .rst_ni(dm_rst_n),
        .testmode_i(1'b0),
        .dmi_rst_no(dmi_rst_n),
        .dmi_req_o(dmi_req),
        .dmi_req_valid_o(dmi_req_valid),
        .dmi_req_ready_i(dmi_req_ready),
        .dmi_resp_i(dmi_resp),
        .dmi_resp_ready_o(dmi_resp_ready),
        .dmi_resp_valid_i(dmi_resp_valid),
        .tck_i(jtag_tck),
        .tms_i(jtag_tms),
        .trst_ni(jtag_trst_n),
        .td_i(jtag_tdi),
        .td_o(jtag_tdo),
        .tdo_oe_o(jtag_tdo_oe)
    );

    dm_top #(
        .NrHarts(1),
        .BusWidth(32),
        .SelectableHarts(1'b1)
    ) dm_inst (
        .clk_i(clk),
        .rst_ni(dm_rst_n),
        .testmode_i(1'b0),
        .ndmreset_o(ndmreset),
        .dmactive_o(dmactive),
        .debug_req_o(debug_req),
        .unavailable_i(1'b0),
        .hartinfo_i(HARTINFO),
        .slave_req_i(dm_slave_req),
        .slave_we_i(dm_slave_we),
        .slave_addr_i(dm_slave_addr),
        .slave_be_i(dm_slave_be),
        .slave_wdata_i(dm_slave_wdata),
        .slave_rdata_o(dm_slave_rdata),
        .master_req_o(sba_req),
        .master_add_o(sba_addr),
        .master_we_o(sba_we),
        .master_wdata_o(sba_wdata),
        .master_be_o(sba_be),
        .master_gnt_i(sba_gnt),
        .master_r_valid_i(sba_rvalid),
        .master_r_rdata_i(sba_rdata),
        .dmi_rst_ni(dmi_rst_n),
        .dmi_req_valid_i(dmi_req_valid),
        .dmi_req_ready_o(dmi_req_ready),
        .dmi_req_i(dmi_req),
        .dmi_resp_valid_o(dmi_resp_valid),
        .dmi_resp_ready_i(dmi_resp_ready),
        .dmi_resp_o(dmi_resp)
    );

    // ---------------------------------------------------------------- bus

    wire [FI_NUM_S-1:0]    fi_m_req;
    wire [FI_NUM_S-1:0]    fi_m_gnt;
    wire [FI_NUM_S*32-1:0] fi_m_addr;
    wire [FI_NUM_S-1:0]    fi_m_we;
    wire [FI_NUM_S*4-1:0]  fi_m_be;
    wire [FI_NUM_S*32-1:0] fi_m_wdata;
    wire [FI_NUM_S*32-1:0] fi_m_rdata;
    wire                   fi_err_unmapped;

    wire [D_NUM_M-1:0]     d_s_gnt;
    wire [D_NUM_M-1:0]     d_s_rvalid;
    wire [D_NUM_M*32-1:0]  d_s_rdata;
    wire [D_NUM_M-1:0]     d_err_unmapped;

    wire [D_NUM_S-1:0]     d_m_req;
    wire [D_NUM_S-1:0]     d_m_gnt;
    wire [D_NUM_S*32-1:0]  d_m_addr;
    wire [D_NUM_S-1:0]     d_m_we;
    wire [D_NUM_S*4-1:0]   d_m_be;
    wire [D_NUM_S*32-1:0]  d_m_wdata;
    wire [D_NUM_S*32-1:0]  d_m_rdata;

    ws_obi_xbar #(
        .NUM_M(1),
        .NUM_S(FI_NUM_S),
        .S_BASE(FI_BASE),
        .S_MASK(FI_MASK),
        .S_READ_ONLY(FI_READ_ONLY)
    ) fetch_xbar_inst (
        .clk(clk),
        .rst(sys_rst_reg),
        .s_obi_req(core_instr_req),
        .s_obi_gnt(core_instr_gnt),
        .s_obi_addr(core_instr_addr),
        .s_obi_we(1'b0),
        .s_obi_be(4'hf),
        .s_obi_wdata(32'h0),
        .s_obi_rvalid(core_instr_rvalid),
        .s_obi_rdata(core_instr_rdata),
        .m_obi_req(fi_m_req),
        .m_obi_gnt(fi_m_gnt),
        .m_obi_addr(fi_m_addr),
        .m_obi_we(fi_m_we),
        .m_obi_be(fi_m_be),
        .m_obi_wdata(fi_m_wdata),
        .m_obi_rdata(fi_m_rdata),
        .err_unmapped(fi_err_unmapped)
    );

    ws_obi_xbar #(
        .NUM_M(D_NUM_M),
        .NUM_S(D_NUM_S),
        .S_BASE(D_BASE),
        .S_MASK(D_MASK),
        .S_READ_ONLY(D_READ_ONLY)
    ) data_xbar_inst (
        .clk(clk),
        .rst(sys_rst_reg),
        .s_obi_req({sba_req, core_data_req}),
        .s_obi_gnt(d_s_gnt),
        .s_obi_addr({sba_addr, core_data_addr}),
        .s_obi_we({sba_we, core_data_we}),
        .s_obi_be({sba_be, core_data_be}),
        .s_obi_wdata({sba_wdata, core_data_wdata}),
        .s_obi_rvalid(d_s_rvalid),
        .s_obi_rdata(d_s_rdata),
        .m_obi_req(d_m_req),
        .m_obi_gnt(d_m_gnt),
        .m_obi_addr(d_m_addr),
        .m_obi_we(d_m_we),
        .m_obi_be(d_m_be),
        .m_obi_wdata(d_m_wdata),
        .m_obi_rdata(d_m_rdata),
        .err_unmapped(d_err_unmapped)
    );

    assign core_data_gnt = d_s_gnt[D_CORE];
    assign core_data_rvalid = d_s_rvalid[D_CORE];
    assign core_data_rdata = d_s_rdata[D_CORE*32 +: 32];
    assign sba_gnt = d_s_gnt[D_SBA];
    assign sba_rvalid = d_s_rvalid[D_SBA];
    assign sba_rdata = d_s_rdata[D_SBA*32 +: 32];

    // Debug-module time slots: the fetch side owns the dm_top slave port in even cycles, the
    // data side in odd ones. dm_top accepts a request in any cycle and answers the next
    // (riscv-dbg dm_mem.sv rdata_q), so each crossbar steers its own answers back.
    reg dm_slot_data_reg, dm_slot_data_next;

    always @* begin
        dm_slot_data_next = !dm_slot_data_reg;
    end

    always @(posedge clk) begin
        dm_slot_data_reg <= dm_slot_data_next;

        if (sys_rst_reg) begin
            dm_slot_data_reg <= 1'b0;
        end
    end

    assign dm_slave_req = dm_slot_data_reg ? d_m_req[D_DEBUG] : fi_m_req[FI_DEBUG];
    assign dm_slave_we = dm_slot_data_reg ? d_m_we[D_DEBUG] : 1'b0;
    assign dm_slave_addr = dm_slot_data_reg ? d_m_addr[D_DEBUG*32 +: 32]
                                            : fi_m_addr[FI_DEBUG*32 +: 32];
    assign dm_slave_be = dm_slot_data_reg ? d_m_be[D_DEBUG*4 +: 4] : 4'hf;
    assign dm_slave_wdata = d_m_wdata[D_DEBUG*32 +: 32];

    // The boot ROM, RAM and peripheral bus accept a request in every cycle.
    assign fi_m_gnt[FI_ROM] = 1'b1;
    assign fi_m_gnt[FI_RAM] = 1'b1;
    assign fi_m_gnt[FI_DEBUG] = !dm_slot_data_reg;
    assign d_m_gnt[D_ROM] = 1'b1;
    assign d_m_gnt[D_RAM] = 1'b1;
    assign d_m_gnt[D_DEBUG] = dm_slot_data_reg;
    assign d_m_gnt[D_PERIPH] = 1'b1;

    // ---------------------------------------------------------------- memories

    wire [31:0] rom_a_rdata;
    wire [31:0] rom_b_rdata;
    wire [31:0] ram_a_rdata;
    wire [31:0] ram_b_rdata;

    ws_bootrom #(
        .ROM_BYTES(ROM_BYTES),
        .BOOTROM_INIT(BOOTROM_INIT)
    ) bootrom_inst (
        .clk(clk),
        .rst(sys_rst_reg),
        .a_req(fi_m_req[FI_ROM]),
        .a_addr(fi_m_addr[FI_ROM*32 + 2 +: ROM_ADDR_WIDTH - 2]),
        .a_rdata(rom_a_rdata),
        .b_req(d_m_req[D_ROM]),
        .b_addr(d_m_addr[D_ROM*32 + 2 +: ROM_ADDR_WIDTH - 2]),
        .b_rdata(rom_b_rdata)
    );

    ws_ram #(
        .RAM_BYTES(RAM_BYTES)
    ) ram_inst (
        .clk(clk),
        .rst(sys_rst_reg),
        .a_req(fi_m_req[FI_RAM]),
        .a_addr(fi_m_addr[FI_RAM*32 + 2 +: RAM_ADDR_WIDTH - 2]),
        .a_rdata(ram_a_rdata),
        .b_req(d_m_req[D_RAM]),
        .b_we(d_m_we[D_RAM]),
        .b_addr(d_m_addr[D_RAM*32 + 2 +: RAM_ADDR_WIDTH - 2]),
        .b_be(d_m_be[D_RAM*4 +: 4]),
        .b_wdata(d_m_wdata[D_RAM*32 +: 32]),
        .b_rdata(ram_b_rdata)
    );

    // ---------------------------------------------------------------- peripherals

    wire [31:0] periph_rdata;

    wire [NUM_SLOTS-1:0]    reg_req;
    wire                    reg_we;
    wire [11:0]             reg_addr;
    wire [31:0]             reg_wdata;
    wire [3:0]              reg_be;
    wire [NUM_SLOTS*32-1:0] reg_rdata;

    ws_periph_bus #(
        .NUM_SLOTS(NUM_SLOTS)
    ) periph_bus_inst (
        .clk(clk),
        .rst(sys_rst_reg),
        .s_req(d_m_req[D_PERIPH]),
        .s_we(d_m_we[D_PERIPH]),
        .s_addr(d_m_addr[D_PERIPH*32 +: 20]),
        .s_be(d_m_be[D_PERIPH*4 +: 4]),
        .s_wdata(d_m_wdata[D_PERIPH*32 +: 32]),
        .s_rdata(periph_rdata),
        .m_reg_req(reg_req),
        .m_reg_we(reg_we),
        .m_reg_addr(reg_addr),
        .m_reg_wdata(reg_wdata),
        .m_reg_be(reg_be),
        .m_reg_rdata(reg_rdata)
    );

    // Slave read data back to the crossbars, in slave-index order.
    assign fi_m_rdata = {dm_slave_rdata, ram_a_rdata, rom_a_rdata};
    assign d_m_rdata = {periph_rdata, dm_slave_rdata, ram_b_rdata, rom_b_rdata};

    ws_sysinfo #(
        .BUILD_HASH(BUILD_HASH),
        .CLK_HZ(CLK_HZ_WORD),
        .ROM_BYTES(ROM_BYTES_WORD),
        .RAM_BYTES(RAM_BYTES_WORD),
        .SLOT_MASK(SLOT_MASK)
    ) sysinfo_inst (
        .clk(clk),
        .rst(periph_rst),
        .reg_req(reg_req[0]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata[0*32 +: 32]),
        .soft_reset(soft_reset)
    );

    ws_timer timer_inst (
        .clk(clk),
        .rst(periph_rst),
        .reg_req(reg_req[1]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata[1*32 +: 32]),
        .irq(irq_timer)
    );

    ws_uart #(
        .TX_DEPTH(16),
        .RX_DEPTH(16)
    ) uart_inst (
        .clk(clk),
        .rst(periph_rst),
        .reg_req(reg_req[2]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata[2*32 +: 32]),
        .uart_tx(uart_tx),
        .uart_rx(uart_rx),
        .irq(irq_uart)
    );

    ws_gpio gpio_inst (
        .clk(clk),
        .rst(periph_rst),
        .reg_req(reg_req[3]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata[3*32 +: 32]),
        .gpio_out(gpio_out),
        .gpio_in(gpio_in)
    );

    ws_hostlink #(
        .RX_DEPTH(1024),
        .TX_DEPTH(1024)
    ) hostlink_inst (
        .clk(clk),
        .rst(periph_rst),
        .reg_req(reg_req[4]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata[4*32 +: 32]),
        .s_link_valid(s_link_valid),
        .s_link_ready(s_link_ready),
        .s_link_data(s_link_data),
        .m_link_valid(m_link_valid),
        .m_link_ready(m_link_ready),
        .m_link_data(m_link_data),
        .irq(irq_hostlink)
    );

    // Slots 5..7 are empty: they read 0.
    assign reg_rdata[5*32 +: 3*32] = {3*32{1'b0}};

    // The link engine's external DMA port belongs to MemoryX's data mover.
    wire                              link_ext_valid;
    wire                              link_ext_ready;
    wire                              link_ext_we;
    wire [$clog2(LINK_DMA_BYTES)-3:0] link_ext_addr;
    wire [31:0]                       link_ext_wdata;
    wire                              link_ext_rvalid;
    wire [31:0]                       link_ext_rdata;
    // Channel 6's producer: the trace unit inside ws_mx_block (docs/trace.md).
    wire                              link_tx2_hw_en;
    wire [31:0]                       link_tx2_hw_ready;
    wire [31:0]                       link_tx2_acked;

    ws_link_block #(
        .DMA_BYTES(LINK_DMA_BYTES)
    ) link_inst (
        .clk(clk),
        .rst(periph_rst),
        .reg_req(reg_req[SLOT_LINK]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata[SLOT_LINK*32 +: 32]),
        .s_phy_valid(s_phy_valid),
        .s_phy_ready(s_phy_ready),
        .s_phy_data(s_phy_data),
        .m_phy_valid(m_phy_valid),
        .m_phy_ready(m_phy_ready),
        .m_phy_data(m_phy_data),
        .ext_valid(link_ext_valid),
        .ext_ready(link_ext_ready),
        .ext_we(link_ext_we),
        .ext_addr(link_ext_addr),
        .ext_wdata(link_ext_wdata),
        .ext_rvalid(link_ext_rvalid),
        .ext_rdata(link_ext_rdata),
        .tx2_hw_en(link_tx2_hw_en),
        .tx2_hw_ready(link_tx2_hw_ready),
        .tx2_acked(link_tx2_acked),
        .irq(irq_link)
    );

    // Slots 9..15 are empty: they read 0.
    assign reg_rdata[9*32 +: 7*32] = {7*32{1'b0}};

    // MemoryX: the streamer's layer table (slot 16), its data mover (slot 17), the weight
    // store behind them, and the data mover's path into the link engine's DMA RAM; the trace
    // unit (slot 18) that writes link channel 6; SwarmX's 4-port node between the mover's gradient feed and the streamer (slot 24); the WAFERS 2x2
    // wafer meshes on its ports (slots 25 .., docs/mesh-array.md "In the SoC", "Several wafers").
    wire mx_mem_err_protocol;

    ws_mx_block #(
        .DATA_WIDTH(256),
        .STORE_BYTES(MX_STORE_BYTES),
        .DMA_BYTES(LINK_DMA_BYTES),
        .SWARM_PORTS(4),
        .MESH_P(MESH_P),
        .MESH_W(WAFERS),
        .FWD_WORDS(MX_FWD_WORDS)
    ) mx_inst (
        .clk(clk),
        .rst(periph_rst),
        .mx_reg_req(reg_req[SLOT_MX]),
        .dma_reg_req(reg_req[SLOT_MXDMA]),
        .trace_reg_req(reg_req[SLOT_TRACE]),
        .swarm_reg_req(reg_req[SLOT_SWARM]),
        .mesh_reg_req(reg_req[SLOT_MESH +: WAFERS]),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .mx_reg_rdata(reg_rdata[SLOT_MX*32 +: 32]),
        .dma_reg_rdata(reg_rdata[SLOT_MXDMA*32 +: 32]),
        .trace_reg_rdata(reg_rdata[SLOT_TRACE*32 +: 32]),
        .swarm_reg_rdata(reg_rdata[SLOT_SWARM*32 +: 32]),
        .mesh_reg_rdata(reg_rdata[SLOT_MESH*32 +: WAFERS*32]),
        .swarm_irq(irq_swarm),
        .ext_valid(link_ext_valid),
        .ext_ready(link_ext_ready),
        .ext_we(link_ext_we),
        .ext_addr(link_ext_addr),
        .ext_wdata(link_ext_wdata),
        .ext_rvalid(link_ext_rvalid),
        .ext_rdata(link_ext_rdata),
        .link_tx_acked(link_tx2_acked),
        .link_tx_ready(link_tx2_hw_ready),
        .link_tx_ready_en(link_tx2_hw_en),
        .mem_err_protocol(mx_mem_err_protocol)
    );

    // Slots 19..23 are empty: they read 0.
    assign reg_rdata[19*32 +: 5*32] = {5*32{1'b0}};

    // Outputs and bus lanes nothing consumes: core and debug status pins, the JTAG output
    // enable (the pin is never shared), unmapped-access pulses (a later issue may count them),
    // address bits outside each slave's window and the write lanes of read-only ports.
    wire _unused_ok = &{1'b0, core_irq_ack, core_irq_id, debug_havereset, debug_running,
                        debug_halted, jtag_tdo_oe, dmactive, fi_err_unmapped, d_err_unmapped,
                        reg_req[7:5], reg_req[15:9], reg_req[23:19], mx_mem_err_protocol,
                        fi_m_addr[FI_ROM*32 +: 2],
                        fi_m_addr[FI_ROM*32 + ROM_ADDR_WIDTH +: 32 - ROM_ADDR_WIDTH],
                        fi_m_addr[FI_RAM*32 +: 2],
                        fi_m_addr[FI_RAM*32 + RAM_ADDR_WIDTH +: 32 - RAM_ADDR_WIDTH],
                        fi_m_we, fi_m_be, fi_m_wdata,
                        d_m_addr[D_ROM*32 +: 2],
                        d_m_addr[D_ROM*32 + ROM_ADDR_WIDTH +: 32 - ROM_ADDR_WIDTH],
                        d_m_addr[D_RAM*32 +: 2],
                        d_m_addr[D_RAM*32 + RAM_ADDR_WIDTH +: 32 - RAM_ADDR_WIDTH],
                        d_m_addr[D_PERIPH*32 + 20 +: 12],
                        d_m_we[D_ROM], d_m_be[D_ROM*4 +: 4], d_m_wdata[D_ROM*32 +: 32]};

endmodule

`default_nettype wire
