// ws_soc_shim: the C ABI of the Verilated weightstream SoC (Vws_soc), loaded by ws-sim and the
// bench through dlopen (hdl/src/sim/soc.rs).
//
// It owns everything that must happen every clock cycle, so the Rust side only runs in
// batches of thousands of cycles:
//   - the host-link byte streams: host->board bytes queued here are fed into s_link_*, and
//     board->host bytes leaving m_link_* are collected; m_link_ready stays high unless the
//     collect buffer is full (the simulated host is never the bottleneck unless it stops
//     reading);
//   - the link engine's PHY word streams (s_phy_*, m_phy_*, link protocol v2): host->board
//     bytes are packed four to a word, stream byte 0 in bits 7:0, and a partial word waits
//     for the rest (every v2 frame is a whole number of words, docs/link.md "Frame", so only a
//     fault-truncated frame leaves one, and the next frame completes it); board->host words
//     are unpacked into bytes, with the same collect-buffer backpressure;
//   - a UART receiver on uart_tx (8N1, LSB first) at the divisor the firmware programmed,
//     read from ws_uart's `div` (public_flat_rd in hdl/sim/sim.vlt), collecting log bytes;
//   - the idle levels of the other inputs: uart_rx high (idle line), gpio_in 0, JTAG with
//     tck 0, tms 1, trst_n 1 (a JTAG server drives them through ws_soc_set_jtag);
//   - an optional FST dump restricted to a window of cycles.
// RAM is reachable by backdoor through ws_ram's `mem` array (public_flat_rw).
//
// One cycle: sample the handshakes presented before the edge, rising edge, then set the next
// inputs and evaluate the falling edge, so every input change is settled before the next
// rising edge. Two evals per cycle, nothing else heavier than a few branches.

#include "Vws_soc.h"
#include "verilated.h"
#include "verilated_syms.h"
#if VM_TRACE_FST
#include "verilated_fst_c.h"
#endif

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kAbi = 2;

// ws_soc_run stop conditions.
constexpr uint32_t kStopOnSleep = 1u << 0;  // return as soon as the core sleeps with no input
constexpr uint32_t kStopOnTx = 1u << 1;     // return as soon as a board->host byte is collected

// ws_soc_run return reasons (bit set).
constexpr uint32_t kRanAll = 0;
constexpr uint32_t kTxFull = 1u << 0;
constexpr uint32_t kSleeping = 1u << 1;
constexpr uint32_t kTxData = 1u << 2;

struct Soc {
    VerilatedContext ctx;
    Vws_soc* top = nullptr;
#if VM_TRACE_FST
    VerilatedFstC* fst = nullptr;
#endif
    uint64_t trace_from = 0;
    uint64_t trace_to = UINT64_MAX;

    uint64_t cycle = 0;

    // Host link.
    std::deque<uint8_t> rx;    // host -> board, waiting for s_link_ready
    std::vector<uint8_t> tx;   // board -> host, collected
    size_t tx_cap = 64 * 1024;
    uint64_t rx_bytes = 0;     // accepted by the SoC
    uint64_t tx_bytes = 0;     // delivered by the SoC

    // Link engine PHY (words), as bytes on the host side.
    std::deque<uint8_t> prx;   // host -> board, four at a time into s_phy_*
    std::vector<uint8_t> ptx;  // board -> host, collected
    size_t ptx_cap = 256 * 1024;
    uint64_t prx_bytes = 0;
    uint64_t ptx_bytes = 0;

    // UART receiver.
    uint32_t fallback_div = 16;
    const void* div_ptr = nullptr;
    int div_type = 0;
    int uart_state = 0;        // 0 idle, 1 receiving
    uint32_t uart_count = 0;
    uint32_t uart_bit = 0;
    uint32_t uart_shift = 0;
    uint32_t uart_div = 0;
    std::vector<uint8_t> log;
    uint64_t log_bytes = 0;
    uint64_t uart_framing = 0;

    // RAM backdoor.
    uint32_t* ram = nullptr;
    uint32_t ram_words = 0;

    std::string error;

    uint32_t div_now() const {
        if (!div_ptr) return fallback_div;
        switch (div_type) {
        case VLVT_UINT8: return *static_cast<const uint8_t*>(div_ptr);
        case VLVT_UINT16: return *static_cast<const uint16_t*>(div_ptr);
        case VLVT_UINT32: return *static_cast<const uint32_t*>(div_ptr);
        default: return fallback_div;
        }
    }

    void dump(uint64_t t) {
#if VM_TRACE_FST
        if (fst && cycle >= trace_from && cycle < trace_to) fst->dump(t);
#else
        (void)t;
#endif
    }

    inline void uart_step(uint8_t line) {
        if (uart_state == 0) {
            if (!line) {
                // Falling edge of the start bit: sample bit 0 at its middle, 1.5 bits on.
                uart_div = div_now();
                if (uart_div < 4) uart_div = 4;
                uart_count = uart_div + uart_div / 2;
                uart_bit = 0;
                uart_shift = 0;
                uart_state = 1;
            }
            return;
        }
        if (--uart_count != 0) return;
        if (uart_bit < 8) {
            uart_shift |= static_cast<uint32_t>(line & 1) << uart_bit;
            ++uart_bit;
            uart_count = uart_div;
            return;
        }
        // Middle of the stop bit.
        if (line) {
            log.push_back(static_cast<uint8_t>(uart_shift));
            ++log_bytes;
        } else {
            ++uart_framing;
        }
        uart_state = 0;
    }

    inline void present_phy_word() {
        const bool have = prx.size() >= 4;
        top->s_phy_valid = have;
        top->s_phy_data = have ? static_cast<uint32_t>(prx[0]) | static_cast<uint32_t>(prx[1]) << 8
                                     | static_cast<uint32_t>(prx[2]) << 16 | static_cast<uint32_t>(prx[3]) << 24
                               : 0;
    }

    // The engine has bytes to take or words to give (the core may sleep meanwhile).
    bool phy_busy() const { return prx.size() >= 4 || top->m_phy_valid; }

    inline void cycle_once() {
        // Handshakes are decided by the values settled before the rising edge.
        const bool s_fire = top->s_link_valid && top->s_link_ready;
        const bool m_fire = top->m_link_valid && top->m_link_ready;
        const uint8_t m_byte = top->m_link_data;
        const bool ps_fire = top->s_phy_valid && top->s_phy_ready;
        const bool pm_fire = top->m_phy_valid && top->m_phy_ready;
        const uint32_t pm_word = top->m_phy_data;

        top->clk = 1;
        top->eval();
        dump(cycle * 10 + 5);

        if (s_fire) {
            rx.pop_front();
            ++rx_bytes;
        }
        if (m_fire) {
            tx.push_back(m_byte);
            ++tx_bytes;
        }
        if (ps_fire) {
            for (int i = 0; i < 4; ++i) prx.pop_front();
            prx_bytes += 4;
        }
        if (pm_fire) {
            for (int i = 0; i < 4; ++i) ptx.push_back(static_cast<uint8_t>(pm_word >> (8 * i)));
            ptx_bytes += 4;
        }
        uart_step(top->uart_tx);

        const bool have_rx = !rx.empty();
        top->s_link_valid = have_rx;
        top->s_link_data = have_rx ? rx.front() : 0;
        top->m_link_ready = tx.size() < tx_cap;
        present_phy_word();
        top->m_phy_ready = ptx.size() + 4 <= ptx_cap;

        top->clk = 0;
        top->eval();
        ++cycle;
        dump(cycle * 10);
    }
};

inline Soc* S(void* h) { return static_cast<Soc*>(h); }

const VerilatedVar* find_var(VerilatedContext& ctx, const char* inst_suffix, const char* var) {
    const VerilatedScopeNameMap* scopes = ctx.scopeNameMap();
    if (!scopes) return nullptr;
    const VerilatedVar* any = nullptr;
    const size_t slen = std::strlen(inst_suffix);
    for (const auto& kv : *scopes) {
        const VerilatedVar* v = kv.second->varFind(var);
        if (!v) continue;
        const char* name = kv.first;
        const size_t nlen = std::strlen(name);
        if (nlen >= slen && std::strcmp(name + nlen - slen, inst_suffix) == 0) return v;
        if (!any) any = v;
    }
    return any;
}

}  // namespace

extern "C" {

uint32_t ws_soc_abi(void) { return kAbi; }

int ws_soc_trace_supported(void) {
#if VM_TRACE_FST
    return 1;
#else
    return 0;
#endif
}

// Creates the SoC with reset asserted and idle inputs. `fst_path` may be null.
// `uart_div_fallback` is the bit time used when ws_uart's divisor cannot be found.
void* ws_soc_create(const char* fst_path, uint32_t uart_div_fallback) {
    Soc* s = new Soc;
#if VM_TRACE_FST
    if (fst_path) s->ctx.traceEverOn(true);
#endif
    s->top = new Vws_soc{&s->ctx, "TOP"};
    Vws_soc* t = s->top;
    t->clk = 0;
    t->rst = 1;
    t->uart_rx = 1;
    t->gpio_in = 0;
    t->jtag_tck = 0;
    t->jtag_tms = 1;
    t->jtag_tdi = 0;
    t->jtag_trst_n = 1;
    t->s_link_valid = 0;
    t->s_link_data = 0;
    t->m_link_ready = 1;
    t->s_phy_valid = 0;
    t->s_phy_data = 0;
    t->m_phy_ready = 1;
    s->fallback_div = uart_div_fallback ? uart_div_fallback : 16;
    t->eval();

    if (const VerilatedVar* v = find_var(s->ctx, ".uart_inst", "div")) {
        s->div_ptr = v->datap();
        s->div_type = v->vltype();
    }
    if (const VerilatedVar* v = find_var(s->ctx, ".ram_inst", "mem")) {
        if (v->vltype() == VLVT_UINT32 && v->udims() == 1) {
            s->ram = static_cast<uint32_t*>(v->datap());
            s->ram_words = static_cast<uint32_t>(v->unpackedRanges()[0].elements());
        }
    }
#if VM_TRACE_FST
    if (fst_path) {
        s->fst = new VerilatedFstC;
        s->top->trace(s->fst, 99);
        s->fst->open(fst_path);
        if (!s->fst->isOpen()) {
            delete s->fst;
            s->fst = nullptr;
            s->error = std::string("cannot open FST file ") + fst_path;
        }
    }
#else
    if (fst_path) s->error = "this model was built without FST support";
#endif
    return s;
}

// Empty when all is well, else why the last create/trace request failed.
const char* ws_soc_error(void* h) { return S(h)->error.c_str(); }

void ws_soc_destroy(void* h) {
    Soc* s = S(h);
    s->top->final();
#if VM_TRACE_FST
    if (s->fst) {
        s->fst->close();
        delete s->fst;
    }
#endif
    delete s->top;
    delete s;
}

// Dump only cycles in [from, to).
void ws_soc_trace_window(void* h, uint64_t from, uint64_t to) {
    S(h)->trace_from = from;
    S(h)->trace_to = to;
}

void ws_soc_trace_flush(void* h) {
#if VM_TRACE_FST
    if (S(h)->fst) S(h)->fst->flush();
#else
    (void)h;
#endif
}

// Holds `rst` for `cycles` cycles, dropping queued link bytes and a half-received UART frame.
void ws_soc_reset(void* h, uint64_t cycles) {
    Soc* s = S(h);
    s->rx.clear();
    s->tx.clear();
    s->prx.clear();
    s->ptx.clear();
    s->uart_state = 0;
    s->top->rst = 1;
    for (uint64_t i = 0; i < cycles; ++i) s->cycle_once();
    s->top->rst = 0;
}

// Runs up to `max_cycles`. Returns the cycles run; *reason gets the kTx*/kSleeping bits that
// made it stop early (0 when it ran them all).
uint64_t ws_soc_run(void* h, uint64_t max_cycles, uint32_t stop, uint32_t* reason) {
    Soc* s = S(h);
    uint64_t n = 0;
    uint32_t why = kRanAll;
    const size_t tx_before = s->tx.size();
    while (n < max_cycles) {
        s->cycle_once();
        ++n;
        if (s->tx.size() >= s->tx_cap || s->ptx.size() + 4 > s->ptx_cap) {
            why |= kTxFull;
            break;
        }
        if ((stop & kStopOnTx) && s->tx.size() > tx_before) {
            why |= kTxData;
            break;
        }
        if ((stop & kStopOnSleep) && s->top->core_sleep && s->rx.empty() && !s->phy_busy()) {
            why |= kSleeping;
            break;
        }
    }
    if (reason) *reason = why;
    return n;
}

uint64_t ws_soc_cycle(void* h) { return S(h)->cycle; }

// Host -> board bytes.
void ws_soc_push_rx(void* h, const uint8_t* data, uint64_t n) {
    Soc* s = S(h);
    s->rx.insert(s->rx.end(), data, data + n);
    if (!s->rx.empty() && !s->top->s_link_valid) {
        // Present the first byte before the next rising edge.
        s->top->s_link_valid = 1;
        s->top->s_link_data = s->rx.front();
        s->top->eval();
    }
}

uint64_t ws_soc_rx_pending(void* h) { return S(h)->rx.size(); }

// Board -> host bytes collected so far; copies up to `cap` and removes them.
uint64_t ws_soc_take_tx(void* h, uint8_t* out, uint64_t cap) {
    Soc* s = S(h);
    const uint64_t n = s->tx.size() < cap ? s->tx.size() : cap;
    std::memcpy(out, s->tx.data(), n);
    s->tx.erase(s->tx.begin(), s->tx.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
}

uint64_t ws_soc_tx_pending(void* h) { return S(h)->tx.size(); }

// Bytes the collect buffer holds before m_link_ready drops (backpressure toward the SoC).
void ws_soc_set_tx_cap(void* h, uint64_t cap) { S(h)->tx_cap = cap ? cap : 1; }

// Host -> board bytes for the link engine's PHY.
void ws_soc_push_phy(void* h, const uint8_t* data, uint64_t n) {
    Soc* s = S(h);
    s->prx.insert(s->prx.end(), data, data + n);
    if (!s->top->s_phy_valid && s->prx.size() >= 4) {
        s->present_phy_word();
        s->top->eval();
    }
}

uint64_t ws_soc_phy_rx_pending(void* h) { return S(h)->prx.size(); }

// Board -> host bytes from the link engine's PHY; copies up to `cap` and removes them.
uint64_t ws_soc_take_phy(void* h, uint8_t* out, uint64_t cap) {
    Soc* s = S(h);
    const uint64_t n = s->ptx.size() < cap ? s->ptx.size() : cap;
    std::memcpy(out, s->ptx.data(), n);
    s->ptx.erase(s->ptx.begin(), s->ptx.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
}

// 1 while the engine has a whole word to take or a word to give.
uint32_t ws_soc_phy_busy(void* h) { return S(h)->phy_busy() ? 1 : 0; }

// UART log bytes decoded so far; copies up to `cap` and removes them.
uint64_t ws_soc_take_log(void* h, uint8_t* out, uint64_t cap) {
    Soc* s = S(h);
    const uint64_t n = s->log.size() < cap ? s->log.size() : cap;
    std::memcpy(out, s->log.data(), n);
    s->log.erase(s->log.begin(), s->log.begin() + static_cast<std::ptrdiff_t>(n));
    return n;
}

// Counters: 0 link rx bytes, 1 link tx bytes, 2 log bytes, 3 UART framing errors,
// 4 current UART divisor, 5 RAM words (0 when the backdoor is missing), 6 PHY rx bytes,
// 7 PHY tx bytes.
uint64_t ws_soc_counter(void* h, uint32_t which) {
    Soc* s = S(h);
    switch (which) {
    case 0: return s->rx_bytes;
    case 1: return s->tx_bytes;
    case 2: return s->log_bytes;
    case 3: return s->uart_framing;
    case 4: return s->div_now();
    case 5: return s->ram_words;
    case 6: return s->prx_bytes;
    case 7: return s->ptx_bytes;
    default: return 0;
    }
}

uint32_t ws_soc_gpio_out(void* h) { return S(h)->top->gpio_out; }
uint32_t ws_soc_core_sleep(void* h) { return S(h)->top->core_sleep; }

void ws_soc_set_gpio_in(void* h, uint32_t v) {
    S(h)->top->gpio_in = static_cast<uint8_t>(v);
}

// JTAG pins, for the JTAG server. Evaluates at once so a TCK edge takes effect and TDO can be
// read back without a system clock cycle.
void ws_soc_set_jtag(void* h, uint32_t tck, uint32_t tms, uint32_t tdi, uint32_t trst_n) {
    Vws_soc* t = S(h)->top;
    t->jtag_tck = tck & 1;
    t->jtag_tms = tms & 1;
    t->jtag_tdi = tdi & 1;
    t->jtag_trst_n = trst_n & 1;
    t->eval();
}

uint32_t ws_soc_get_tdo(void* h) { return S(h)->top->jtag_tdo; }

// RAM backdoor, by word index from the RAM base. Return 0 on success, -1 out of range or
// no backdoor.
int ws_soc_ram_write(void* h, uint32_t word, uint32_t value) {
    Soc* s = S(h);
    if (!s->ram || word >= s->ram_words) return -1;
    s->ram[word] = value;
    return 0;
}

int ws_soc_ram_read(void* h, uint32_t word, uint32_t* value) {
    Soc* s = S(h);
    if (!s->ram || word >= s->ram_words) return -1;
    *value = s->ram[word];
    return 0;
}

}  // extern "C"
