`default_nettype none

// ws_hostlink: byte-stream host link with receive and transmit FIFOs, register slot 4
// (hdl/regmap/hostlink.toml).
//
// s_link carries bytes from the host (USB FIFO, PCIe or the simulator socket, via the board's
// PHY adapter) into the RX FIFO; firmware pops them through RXDATA. Bytes written to TXDATA
// queue in the TX FIFO and leave on m_link toward the host. Today the control protocol runs
// over it byte by byte; the DMA bulk channels of the link issue will sit beside these FIFOs.
// The FIFOs are deep (1024 bytes by default, one ECP5 block RAM each) so a whole control frame
// fits while firmware is busy. s_link is never dropped: s_link_ready falls when the RX FIFO is
// full and the host-side credits keep the link from needing it. A TXDATA write to a full TX
// FIFO is dropped and flagged in ERRORS.tx_overflow. RX_BYTES and TX_BYTES count accepted
// stream handshakes. `irq` (CV32E40P irq_i[17]) is level: IRQ_EN.rx and a byte in RXDATA.
module ws_hostlink #(
    parameter RX_DEPTH = 1024,  // receive FIFO depth in bytes; a power of two, at most 32768
    parameter TX_DEPTH = 1024   // transmit FIFO depth in bytes; equal to RX_DEPTH
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        reg_req,
    input  wire        reg_we,
    input  wire [11:0] reg_addr,
    input  wire [31:0] reg_wdata,
    input  wire [3:0]  reg_be,
    output wire [31:0] reg_rdata,

    // Host to board.
    input  wire        s_link_valid,
    output wire        s_link_ready,
    input  wire [7:0]  s_link_data,

    // Board to host.
    output wire        m_link_valid,
    input  wire        m_link_ready,
    output wire [7:0]  m_link_data,

    output wire        irq
);

    localparam RX_LEVEL_WIDTH = $clog2(RX_DEPTH + 1);
    localparam TX_LEVEL_WIDTH = $clog2(TX_DEPTH + 1);
    localparam [31:0] RX_DEPTH_WORD = RX_DEPTH;

    initial begin
        if (RX_DEPTH < 2 || (RX_DEPTH & (RX_DEPTH - 1)) != 0 || RX_DEPTH > 32768) begin
            // STATUS.rx_level is 16 bits wide.
            $error("ws_hostlink: RX_DEPTH must be a power of two in 2..32768");
        end
        if (TX_DEPTH != RX_DEPTH) begin
            // FIFO_DEPTH reports one depth for both FIFOs.
            $error("ws_hostlink: TX_DEPTH must equal RX_DEPTH");
        end
    end

    wire [7:0] txdata_byte;
    wire       txdata_we;
    wire       rxdata_re;
    wire       irq_en_rx;
    wire       irq_en_we;
    wire       errors_tx_overflow;
    wire       errors_we;

    wire                      tx_fifo_s_ready;
    wire [TX_LEVEL_WIDTH-1:0] tx_fifo_level;
    wire                      rx_fifo_m_valid;
    wire [7:0]                rx_fifo_m_data;
    wire [RX_LEVEL_WIDTH-1:0] rx_fifo_level;

    reg [31:0] rx_bytes_reg, rx_bytes_next;
    reg [31:0] tx_bytes_reg, tx_bytes_next;

    reg [15:0] rx_level_16;

    ws_hostlink_csr ws_hostlink_csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .txdata_byte(txdata_byte),
        .txdata_we(txdata_we),
        .rxdata_byte_i(rx_fifo_m_valid ? rx_fifo_m_data : 8'h00),
        .rxdata_valid_i(rx_fifo_m_valid),
        .rxdata_re(rxdata_re),
        .status_rx_level_i(rx_level_16),
        .status_tx_full_i(!tx_fifo_s_ready),
        .status_tx_empty_i(tx_fifo_level == {TX_LEVEL_WIDTH{1'b0}}),
        .irq_en_rx(irq_en_rx),
        .irq_en_we(irq_en_we),
        .rx_bytes_count_i(rx_bytes_reg),
        .tx_bytes_count_i(tx_bytes_reg),
        .errors_tx_overflow_set(txdata_we && !tx_fifo_s_ready),
        .errors_tx_overflow(errors_tx_overflow),
        .errors_we(errors_we),
        .fifo_depth_bytes_i(RX_DEPTH_WORD[15:0])
    );

    ws_fifo #(
        .DEPTH(RX_DEPTH),
        .WIDTH(8)
    ) rx_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(s_link_valid),
        .s_ready(s_link_ready),
        .s_data(s_link_data),
        .m_valid(rx_fifo_m_valid),
        .m_ready(rxdata_re),
        .m_data(rx_fifo_m_data),
        .level(rx_fifo_level)
    );

    ws_fifo #(
        .DEPTH(TX_DEPTH),
        .WIDTH(8)
    ) tx_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(txdata_we),
        .s_ready(tx_fifo_s_ready),
        .s_data(txdata_byte),
        .m_valid(m_link_valid),
        .m_ready(m_link_ready),
        .m_data(m_link_data),
        .level(tx_fifo_level)
    );

    always @* begin
        rx_level_16 = 16'd0;
        rx_level_16[RX_LEVEL_WIDTH-1:0] = rx_fifo_level;

        rx_bytes_next = rx_bytes_reg + {31'd0, s_link_valid && s_link_ready};
        tx_bytes_next = tx_bytes_reg + {31'd0, m_link_valid && m_link_ready};
    end

    always @(posedge clk) begin
        rx_bytes_reg <= rx_bytes_next;
        tx_bytes_reg <= tx_bytes_next;

        if (rst) begin
            rx_bytes_reg <= 32'd0;
            tx_bytes_reg <= 32'd0;
        end
    end

    assign irq = irq_en_rx && rx_fifo_m_valid;

    wire _unused_ok = &{1'b0, irq_en_we, errors_tx_overflow, errors_we};

endmodule

`default_nettype wire
