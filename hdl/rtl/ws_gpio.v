`default_nettype none

// ws_gpio: LEDs and general-purpose inputs in register slot 3 (hdl/regmap/gpio.toml).
//
// OUTPUT drives gpio_out straight from its register. gpio_in comes from buttons and switches
// that are asynchronous to clk, so each bit passes a two-flop synchroniser before INPUT
// presents it. Debouncing is left to firmware.
module ws_gpio (
    input  wire        clk,
    input  wire        rst,

    input  wire        reg_req,
    input  wire        reg_we,
    input  wire [11:0] reg_addr,
    input  wire [31:0] reg_wdata,
    input  wire [3:0]  reg_be,
    output wire [31:0] reg_rdata,

    output wire [7:0]  gpio_out,
    input  wire [7:0]  gpio_in
);

    wire [7:0] output_value;
    wire       output_we;

    // Two-flop synchroniser: the first stage may go metastable, the second settles it.
    reg [7:0] in_meta_reg;
    reg [7:0] in_sync_reg;

    ws_gpio_csr ws_gpio_csr_inst (
        .clk(clk),
        .rst(rst),
        .reg_req(reg_req),
        .reg_we(reg_we),
        .reg_addr(reg_addr),
        .reg_wdata(reg_wdata),
        .reg_be(reg_be),
        .reg_rdata(reg_rdata),
        .output_value(output_value),
        .output_we(output_we),
        .input_value_i(in_sync_reg)
    );

    // No reset on the synchroniser: it only ever copies the pins.
    always @(posedge clk) begin
        in_meta_reg <= gpio_in;
        in_sync_reg <= in_meta_reg;
    end

    assign gpio_out = output_value;

    wire _unused_ok = &{1'b0, output_we};

endmodule

`default_nettype wire
