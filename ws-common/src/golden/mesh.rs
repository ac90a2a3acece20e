//! The wafer mesh, bit for bit: a P×Q mesh of PEs training a ReLU MLP under weight streaming
//! (docs/architecture.md "Wafer emulation", issue 7, `docs/mesh.md`).
//!
//! This is the golden model that the PE and mesh testbenches compare against, that the
//! firmware uses to check a configuration before a step, and that the host uses to predict
//! what the mesh emits. Everything is binary32 on raw bits, and every operation is one an
//! FPnew unit does: [`fma`](super::optim::fma), [`add`](super::fp::add),
//! [`mul`](super::fp::mul) (RNE, subnormals kept, canonical NaN), a correctly rounded
//! [`div`](super::optim::div), comparisons, and integer arithmetic on exponent fields.
//!
//! # The dataflow as modelled
//!
//! - **Batch split** ([`geometry`]): sample `s` lives on the PE at position `s / B` of the
//!   *snake* (row 0 west to east, row 1 east to west, ...), in slot `s % B`. That PE keeps the
//!   sample's activations of every layer.
//! - **Weight stream** ([`stream`]): a layer with K inputs and M outputs streams as M rows of
//!   K + 1 words, `[b_i, w_i0, …, w_i(K−1)]`, cut into chunks of whole rows. Forward and
//!   backward stream the same words; the gradient leaves in the same layout, so MemoryX pairs
//!   each gradient word with its weight by the flit header alone.
//! - **Forward** ([`dense::forward`]): every PE computes `y = relu(Wx + b)` for its samples
//!   (no ReLU on the last layer): one FMA chain per output, started from the bias, over k in
//!   increasing order.
//! - **Loss** ([`loss`]): softmax cross-entropy per sample with the [`exp`](funcs::exp) and
//!   [`ln`](funcs::ln) units, argmax with the first index winning ties.
//! - **Backward** ([`dense`]): the rows stream again; each PE computes dx for its samples (an
//!   FMA chain over the rows in stream order, from −0). dW and db are reduced over the whole
//!   batch in the order [`Reduce`] names and leave the mesh as gradient flits, by (layer,
//!   chunk, step).
//! - **Step** ([`step`]): the whole MLP (for example 64→128→64→10), forward, loss, backward,
//!   with caller-provided buffers; `step::run` (feature `std`: the host and the
//!   testbenches) allocates them.
//! - **Configuration** ([`config`]): shapes, mesh, stream limits and the PE SRAM budget are
//!   checked before a step, and refused with a [`MeshError`].
//!
//! # Accumulation orders
//!
//! Per sample (forward, dx, softmax) nothing depends on the mesh. For the batch reductions
//! (dW, db, the loss), [`Reduce::Snake`] is the default: one FMA chain over the samples in
//! increasing order, the running sum passed from PE to PE along the snake. Its bits are the
//! same for every mesh shape and batch per PE. [`Reduce::RowCol`] is the classic funnel of
//! per-PE partial sums (along each row, then up column 0), whose bits depend on the mesh.
//! The exact formulas are in [`dense`] and `docs/mesh.md`.

pub mod config;
pub mod dense;
pub mod funcs;
pub mod geometry;
pub mod loss;
pub mod step;
pub mod stream;

#[cfg(test)]
mod tests;

pub use config::{Budget, Config, Model, Sram};
pub use geometry::{Mesh, Pe, Placement};
pub use stream::{Layer, StreamLayout};

/// How the batch reductions (dW, db and the loss) are ordered over the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reduce {
    /// One FMA chain over every sample of the batch in increasing order, from −0: PE by PE
    /// along the snake, each PE continuing the chain over its slots before passing it on.
    /// The result is independent of the mesh shape and of the batch per PE.
    #[default]
    Snake,
    /// Per-PE partial sums (an FMA chain over the PE's slots from −0), added along each mesh
    /// row from the east edge to column 0, then the row sums added up column 0 from the south
    /// edge to row 0. The result depends on the mesh shape and on the batch per PE.
    RowCol,
}

/// Why a configuration, a batch or a buffer is refused. Each message says what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    /// A mesh side is 0 or larger than [`geometry::MAX_SIDE`].
    #[error("a mesh of {rows}×{cols} PEs is not supported: each side must be 1..={max}", max = geometry::MAX_SIDE)]
    BadMesh {
        /// PE rows.
        rows: usize,
        /// PE columns.
        cols: usize,
    },
    /// The batch per PE is 0 or larger than [`geometry::MAX_BATCH_PER_PE`].
    #[error("batch per PE {0} is not supported: use 1..={max}", max = geometry::MAX_BATCH_PER_PE)]
    BadBatchPerPe(usize),
    /// The model has fewer than 2 dimensions (no layer).
    #[error("the model has {0} dimensions: give at least the input and the class count")]
    NoLayers(usize),
    /// The model has more layers than [`config::MAX_LAYERS`].
    #[error("the model has {0} layers: at most {max} are supported", max = config::MAX_LAYERS)]
    TooManyLayers(usize),
    /// A dimension of the model is 0.
    #[error("dimension {index} of the model is 0: every layer needs at least one input and one output")]
    ZeroDim {
        /// Index into the model's dimensions (0 is the input width).
        index: usize,
    },
    /// A layer id does not fit the flit header's layer field.
    #[error("layer id {0} does not fit the 12-bit layer field of the flit header (at most {max})", max = stream::MAX_LAYER_IDS - 1)]
    LayerId(usize),
    /// `rows_per_chunk` is 0.
    #[error("the stream layout has 0 rows per chunk: use at least 1")]
    ZeroRowsPerChunk,
    /// A chunk holds more flits than the 16-bit flit index can count.
    #[error("layer {layer}: a chunk of {words} flits exceeds the flit index (at most {max}); lower rows_per_chunk", max = stream::MAX_CHUNK_FLITS)]
    ChunkTooLarge {
        /// The layer.
        layer: usize,
        /// Flits in one full chunk.
        words: usize,
    },
    /// A layer has more chunks than the 16-bit chunk field can count.
    #[error("layer {layer} needs {chunks} chunks: at most {max}; raise rows_per_chunk", max = stream::MAX_CHUNKS)]
    TooManyChunks {
        /// The layer.
        layer: usize,
        /// Chunks it would need.
        chunks: usize,
    },
    /// The PE program does not fit the PE's SRAM.
    #[error("the PE program of {program_words} words does not fit a PE SRAM of {sram_words} words")]
    ProgramTooLarge {
        /// Words of the program.
        program_words: usize,
        /// Words of the SRAM.
        sram_words: usize,
    },
    /// A layer's partial-sum buffer alone (with the program) does not fit the SRAM.
    #[error("layer {layer} needs {needed} words of program and partial sums, more than the PE SRAM's {sram_words}: split the layer or use a larger SRAM")]
    LayerTooLarge {
        /// The layer.
        layer: usize,
        /// Words needed with no sample at all.
        needed: usize,
        /// Words of the SRAM.
        sram_words: usize,
    },
    /// Even one sample per PE does not fit the SRAM.
    #[error("one sample per PE needs {needed} words, more than the PE SRAM's {sram_words}: the layers are too wide for this PE")]
    ModelTooLarge {
        /// Words needed at one sample per PE.
        needed: usize,
        /// Words of the SRAM.
        sram_words: usize,
    },
    /// The batch per PE does not fit the SRAM.
    #[error("{batch_per_pe} samples per PE need {needed} words, more than the PE SRAM's {sram_words}: at most {max_batch_per_pe} samples per PE fit")]
    SamplesExceedSram {
        /// The batch per PE asked for.
        batch_per_pe: usize,
        /// The most that fits.
        max_batch_per_pe: usize,
        /// Words it would need.
        needed: usize,
        /// Words of the SRAM.
        sram_words: usize,
    },
    /// A size computation overflowed `usize`.
    #[error("the configuration's sizes overflow the address space: use smaller layers or batches")]
    SizeOverflow,
    /// The batch has no sample.
    #[error("the batch is empty: give at least one sample")]
    EmptyBatch,
    /// The batch has more samples than the mesh holds.
    #[error("{samples} samples do not fit {capacity} slots (PEs × batch per PE): raise the batch per PE or split the batch")]
    BatchTooLarge {
        /// Samples given.
        samples: usize,
        /// PEs × batch per PE.
        capacity: usize,
    },
    /// A buffer has the wrong length.
    #[error("the {what} buffer holds {got} words where {expected} are needed")]
    Length {
        /// Which buffer.
        what: &'static str,
        /// Words needed.
        expected: usize,
        /// Words given.
        got: usize,
    },
    /// A label is not a class of the last layer.
    #[error("sample {sample} has label {label}, but the last layer has {classes} classes")]
    BadLabel {
        /// The sample.
        sample: usize,
        /// Its label.
        label: u32,
        /// Classes of the last layer.
        classes: usize,
    },
}
