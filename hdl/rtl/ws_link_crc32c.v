`default_nettype none

// ws_link_crc32c: one step of CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) over up
// to four bytes of a 32-bit word, combinational (docs/link.md "Engine internals").
//
// crc_i / crc_o are the running register, not the finished CRC: a frame starts from
// 32'hFFFF_FFFF and the CRC on the wire is ~crc_o after its last byte (RFC 3720 §B.4, the
// same convention as ws_common::crc32c). Stream byte 0 is data_i[7:0]; bytes_i says how many
// bytes of the word count, from byte 0 up (0 passes crc_i through). The loop unrolls into an
// XOR tree of depth ~log2(32 + 32) per output bit; the engine registers crc_o each cycle.
module ws_link_crc32c (
    input  wire [31:0] crc_i,
    input  wire [31:0] data_i,
    input  wire [2:0]  bytes_i,
    output wire [31:0] crc_o
);

    localparam [31:0] POLY = 32'h82F6_3B78;

    function automatic [31:0] step(input [31:0] crc, input [31:0] data, input [2:0] n);
        integer b;
        integer i;
        reg [31:0] c;
        begin
            c = crc;
            for (b = 0; b < 4; b = b + 1) begin
                if (b < n) begin
                    c = c ^ {24'd0, data[8*b +: 8]};
                    for (i = 0; i < 8; i = i + 1) begin
                        c = (c >> 1) ^ (POLY & {32{c[0]}});
                    end
                end
            end
            step = c;
        end
    endfunction

    assign crc_o = step(crc_i, data_i, bytes_i);

endmodule

`default_nettype wire
