`default_nettype none

// ws_uart: 8N1 UART with transmit and receive FIFOs, register slot 2 (hdl/regmap/uart.toml).
//
// It carries the firmware's defmt log stream when a board has no faster link, and a console.
// Bit time is DIV clock cycles (values below 4 act as 4, so the receiver still finds a
// mid-bit). Frames are one start bit (0), eight data bits LSB first and one stop bit (1).
// The receiver synchronises uart_rx with two flops, starts on a falling edge, confirms the
// start bit at mid-bit (a shorter glitch is ignored) and then samples every bit at its middle.
// A stop bit that reads 0 drops the byte and sets ERRORS.framing; the receiver then waits for
// the next falling edge, so a held-low line (break) does not produce a stream of bytes.
// Writes to a full TX FIFO and bytes arriving at a full RX FIFO are dropped and flagged in
// ERRORS. `irq` (CV32E40P irq_i[16]) is level: IRQ_EN.rx and a byte waiting in RXDATA.
module ws_uart #(
    parameter TX_DEPTH = 16,  // transmit FIFO depth in bytes; a power of two
    parameter RX_DEPTH = 16   // receive FIFO depth in bytes; a power of two
) (
    input  wire        clk,
    input  wire        rst,

    input  wire        reg_req,
    input  wire        reg_we,
    input  wire [11:0] reg_addr,
    input  wire [31:0] reg_wdata,
    input  wire [3:0]  reg_be,
    output wire [31:0] reg_rdata,

    output wire        uart_tx,
    input  wire        uart_rx,

    output wire        irq
);

    localparam TX_LEVEL_WIDTH = $clog2(TX_DEPTH + 1);
    localparam RX_LEVEL_WIDTH = $clog2(RX_DEPTH + 1);
    localparam [15:0] MIN_DIV = 16'd4;

    initial begin
        if (TX_DEPTH < 2 || (TX_DEPTH & (TX_DEPTH - 1)) != 0) begin
            $error("ws_uart: TX_DEPTH must be a power of two >= 2");
        end
        if (RX_DEPTH < 2 || (RX_DEPTH & (RX_DEPTH - 1)) != 0) begin
            $error("ws_uart: RX_DEPTH must be a power of two >= 2");
        end
    end

    // CSR block fields.
    wire [7:0]  txdata_byte;
    wire        txdata_we;
    wire        rxdata_re;
    wire [15:0] div_cycles;
    wire        div_we;
    wire        irq_en_rx;
    wire        irq_en_we;
    wire        errors_tx_overflow;
    wire        errors_rx_overflow;
    wire        errors_framing;
    wire        errors_we;

    // FIFOs.
    wire                      tx_fifo_s_ready;
    wire                      tx_fifo_m_valid;
    wire                      tx_fifo_m_ready;
    wire [7:0]                tx_fifo_m_data;
    wire [TX_LEVEL_WIDTH-1:0] tx_fifo_level;

    wire                      rx_fifo_s_valid;
    wire                      rx_fifo_s_ready;
    wire                      rx_fifo_m_valid;
    wire [7:0]                rx_fifo_m_data;
    wire [RX_LEVEL_WIDTH-1:0] rx_fifo_level;

    // Transmitter: a 10-bit frame shifted out LSB first.
    reg        tx_busy_reg, tx_busy_next;
    reg [9:0]  tx_shift_reg, tx_shift_next;
    reg [3:0]  tx_bits_reg, tx_bits_next;
    reg [15:0] tx_count_reg, tx_count_next;
    reg        tx_out_reg, tx_out_next;

    // Receiver.
    localparam [1:0] RX_IDLE = 2'd0;
    localparam [1:0] RX_START = 2'd1;
    localparam [1:0] RX_DATA = 2'd2;
    localparam [1:0] RX_STOP = 2'd3;

    reg        rx_meta_reg;
    reg        rx_sync_reg;
    reg        rx_prev_reg, rx_prev_next;
    reg [1:0]  rx_state_reg, rx_state_next;
    reg [7:0]  rx_shift_reg, rx_shift_next;
    reg [2:0]  rx_bits_reg, rx_bits_next;
    reg [15:0] rx_count_reg, rx_count_next;
    reg        rx_push;
    reg        rx_framing;

    reg [15:0] div;

    ws_uart_csr ws_uart_csr_inst (
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
        .status_tx_full_i(!tx_fifo_s_ready),
        .status_tx_empty_i(tx_fifo_level == {TX_LEVEL_WIDTH{1'b0}}),
        .status_rx_valid_i(rx_fifo_m_valid),
        .status_tx_idle_i((tx_fifo_level == {TX_LEVEL_WIDTH{1'b0}}) && !tx_busy_reg),
        .div_cycles(div_cycles),
        .div_we(div_we),
        .irq_en_rx(irq_en_rx),
        .irq_en_we(irq_en_we),
        .errors_tx_overflow_set(txdata_we && !tx_fifo_s_ready),
        .errors_tx_overflow(errors_tx_overflow),
        .errors_rx_overflow_set(rx_push && !rx_fifo_s_ready),
        .errors_rx_overflow(errors_rx_overflow),
        .errors_framing_set(rx_framing),
        .errors_framing(errors_framing),
        .errors_we(errors_we)
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
        .m_valid(tx_fifo_m_valid),
        .m_ready(tx_fifo_m_ready),
        .m_data(tx_fifo_m_data),
        .level(tx_fifo_level)
    );

    ws_fifo #(
        .DEPTH(RX_DEPTH),
        .WIDTH(8)
    ) rx_fifo_inst (
        .clk(clk),
        .rst(rst),
        .s_valid(rx_fifo_s_valid),
        .s_ready(rx_fifo_s_ready),
        .s_data(rx_shift_reg),
        .m_valid(rx_fifo_m_valid),
        .m_ready(rxdata_re),
        .m_data(rx_fifo_m_data),
        .level(rx_fifo_level)
    );

    // The shifter takes the next byte only when it is idle.
    assign tx_fifo_m_ready = !tx_busy_reg;
    assign rx_fifo_s_valid = rx_push;

    always @* begin
        div = (div_cycles < MIN_DIV) ? MIN_DIV : div_cycles;
    end

    // Transmitter.
    always @* begin
        tx_busy_next = tx_busy_reg;
        tx_shift_next = tx_shift_reg;
        tx_bits_next = tx_bits_reg;
        tx_count_next = tx_count_reg;
        tx_out_next = tx_out_reg;

        if (!tx_busy_reg) begin
            tx_out_next = 1'b1;
            if (tx_fifo_m_valid) begin
                // {stop, data[7:0], start}; the start bit goes out now.
                tx_busy_next = 1'b1;
                tx_shift_next = {1'b1, tx_fifo_m_data, 1'b0};
                tx_bits_next = 4'd9;
                tx_count_next = div - 16'd1;
                tx_out_next = 1'b0;
            end
        end else if (tx_count_reg != 16'd0) begin
            tx_count_next = tx_count_reg - 16'd1;
        end else if (tx_bits_reg != 4'd0) begin
            tx_shift_next = {1'b1, tx_shift_reg[9:1]};
            tx_out_next = tx_shift_reg[1];
            tx_bits_next = tx_bits_reg - 4'd1;
            tx_count_next = div - 16'd1;
        end else begin
            // The stop bit has had its full time.
            tx_busy_next = 1'b0;
            tx_out_next = 1'b1;
        end
    end

    // Receiver.
    always @* begin
        rx_prev_next = rx_sync_reg;
        rx_state_next = rx_state_reg;
        rx_shift_next = rx_shift_reg;
        rx_bits_next = rx_bits_reg;
        rx_count_next = rx_count_reg;
        rx_push = 1'b0;
        rx_framing = 1'b0;

        case (rx_state_reg)
            RX_IDLE: begin
                if (rx_prev_reg && !rx_sync_reg) begin
                    rx_state_next = RX_START;
                    rx_count_next = {1'b0, div[15:1]} - 16'd1;
                end
            end
            RX_START: begin
                if (rx_count_reg != 16'd0) begin
                    rx_count_next = rx_count_reg - 16'd1;
                end else if (!rx_sync_reg) begin
                    rx_state_next = RX_DATA;
                    rx_bits_next = 3'd0;
                    rx_count_next = div - 16'd1;
                end else begin
                    rx_state_next = RX_IDLE;
                end
            end
            RX_DATA: begin
                if (rx_count_reg != 16'd0) begin
                    rx_count_next = rx_count_reg - 16'd1;
                end else begin
                    rx_shift_next = {rx_sync_reg, rx_shift_reg[7:1]};
                    rx_bits_next = rx_bits_reg + 3'd1;
                    rx_count_next = div - 16'd1;
                    if (rx_bits_reg == 3'd7) begin
                        rx_state_next = RX_STOP;
                    end
                end
            end
            default: begin
                // RX_STOP: sample at mid-bit and hand the byte over; the remaining half stop bit
                // overlaps the search for the next start edge.
                if (rx_count_reg != 16'd0) begin
                    rx_count_next = rx_count_reg - 16'd1;
                end else begin
                    rx_state_next = RX_IDLE;
                    if (rx_sync_reg) begin
                        rx_push = 1'b1;
                    end else begin
                        rx_framing = 1'b1;
                    end
                end
            end
        endcase
    end

    always @(posedge clk) begin
        rx_meta_reg <= uart_rx;
        rx_sync_reg <= rx_meta_reg;

        tx_busy_reg <= tx_busy_next;
        tx_shift_reg <= tx_shift_next;
        tx_bits_reg <= tx_bits_next;
        tx_count_reg <= tx_count_next;
        tx_out_reg <= tx_out_next;

        rx_prev_reg <= rx_prev_next;
        rx_state_reg <= rx_state_next;
        rx_shift_reg <= rx_shift_next;
        rx_bits_reg <= rx_bits_next;
        rx_count_reg <= rx_count_next;

        if (rst) begin
            // The line idles high; resetting the synchroniser high avoids a false start edge.
            rx_meta_reg <= 1'b1;
            rx_sync_reg <= 1'b1;
            tx_busy_reg <= 1'b0;
            tx_out_reg <= 1'b1;
            rx_prev_reg <= 1'b1;
            rx_state_reg <= RX_IDLE;
        end
    end

    assign uart_tx = tx_out_reg;
    assign irq = irq_en_rx && rx_fifo_m_valid;

    // Register outputs the hardware does not need beyond the CSR block itself.
    wire _unused_ok = &{1'b0, div_we, irq_en_we, errors_tx_overflow, errors_rx_overflow,
                        errors_framing, errors_we, rx_fifo_level};

endmodule

`default_nettype wire
