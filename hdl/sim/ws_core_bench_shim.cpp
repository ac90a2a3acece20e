// ws_core_bench_shim: a bare CV32E40P (cv32e40p_top, FPU off) with a minimal memory, for the
// "SoC against a bare core" figure of `cargo xtask bench` (hdl/src/bench.rs; docs/architecture.md,
// "Simulator"). Not a simulator of anything: no bus fabric, no peripherals, no debug module.
//
// Both OBI ports are granted at once and answered the next cycle from one word array, the
// best case for the core, so the figure is the cost of the core alone. The same two-eval
// cycle as ws_soc_shim.cpp keeps the comparison fair.

#include "Vcv32e40p_top.h"
#include "verilated.h"

#include <cstdint>
#include <vector>

namespace {

constexpr uint32_t kAbi = 1;

struct Core {
    VerilatedContext ctx;
    Vcv32e40p_top* top = nullptr;
    std::vector<uint32_t> mem;
    uint64_t cycle = 0;
    uint64_t fetches = 0;  // proves the core runs rather than sitting in reset or a stall

    uint32_t* word(uint32_t addr) {
        const uint32_t w = (addr >> 2) & static_cast<uint32_t>(mem.size() - 1);
        return &mem[w];
    }

    inline void cycle_once() {
        // Requests granted before the edge are answered in the cycle after it.
        const bool i_fire = top->instr_req_o;
        const bool d_fire = top->data_req_o;
        uint32_t i_data = 0, d_data = 0;
        if (i_fire) {
            i_data = *word(top->instr_addr_o);
            ++fetches;
        }
        if (d_fire) {
            uint32_t* w = word(top->data_addr_o);
            if (top->data_we_o) {
                uint32_t m = 0;
                for (int b = 0; b < 4; ++b)
                    if (top->data_be_o & (1u << b)) m |= 0xffu << (8 * b);
                *w = (*w & ~m) | (top->data_wdata_o & m);
            }
            d_data = *w;
        }

        top->clk_i = 1;
        top->eval();

        top->instr_rvalid_i = i_fire;
        top->instr_rdata_i = i_data;
        top->data_rvalid_i = d_fire;
        top->data_rdata_i = d_data;

        top->clk_i = 0;
        top->eval();
        ++cycle;
    }
};

inline Core* C(void* h) { return static_cast<Core*>(h); }

}  // namespace

extern "C" {

uint32_t ws_core_abi(void) { return kAbi; }

// A core with `mem_words` (a power of two) words of memory at address 0, aliased over the
// whole address space, held in reset.
void* ws_core_create(uint32_t mem_words) {
    Core* c = new Core;
    c->mem.assign(mem_words ? mem_words : 1024, 0);
    Vcv32e40p_top* t = new Vcv32e40p_top{&c->ctx, "TOP"};
    c->top = t;
    t->clk_i = 0;
    t->rst_ni = 0;
    t->pulp_clock_en_i = 0;
    t->scan_cg_en_i = 0;
    t->boot_addr_i = 0;
    t->mtvec_addr_i = 0;
    t->dm_halt_addr_i = 0;
    t->hart_id_i = 0;
    t->dm_exception_addr_i = 0;
    t->instr_gnt_i = 1;
    t->instr_rvalid_i = 0;
    t->instr_rdata_i = 0;
    t->data_gnt_i = 1;
    t->data_rvalid_i = 0;
    t->data_rdata_i = 0;
    t->irq_i = 0;
    t->debug_req_i = 0;
    t->fetch_enable_i = 1;
    t->eval();
    return c;
}

void ws_core_destroy(void* h) {
    Core* c = C(h);
    c->top->final();
    delete c->top;
    delete c;
}

int ws_core_mem_write(void* h, uint32_t word, uint32_t value) {
    Core* c = C(h);
    if (word >= c->mem.size()) return -1;
    c->mem[word] = value;
    return 0;
}

void ws_core_reset(void* h, uint64_t cycles) {
    Core* c = C(h);
    c->top->rst_ni = 0;
    for (uint64_t i = 0; i < cycles; ++i) c->cycle_once();
    c->top->rst_ni = 1;
}

uint64_t ws_core_run(void* h, uint64_t cycles) {
    Core* c = C(h);
    for (uint64_t i = 0; i < cycles; ++i) c->cycle_once();
    return cycles;
}

uint64_t ws_core_cycle(void* h) { return C(h)->cycle; }

uint64_t ws_core_fetches(void* h) { return C(h)->fetches; }

}  // extern "C"
