//! The model, the PE SRAM budget, and the checks a configuration passes before a step.
//!
//! # The PE SRAM budget
//!
//! A PE's SRAM (32-bit words) holds, for a model with dimensions `d_0 → d_1 → … → d_L`
//! (`d_0` inputs, `d_L` classes) and `B` samples per PE:
//!
//! - program: `program_words`, the per-layer program the firmware loads;
//! - partial-sum rows: `2·(max_l d_l + 1)` over l < L, one gradient row (db, dW) in flight
//!   and the next being formed, double-buffered, for the widest layer input;
//! - activations: `B·(d_0 + d_1 + … + d_L)`, each slot's input and every layer's output,
//!   kept from the forward for the backward (the logits become dz in place);
//! - dx accumulators: `B·max(d_1, …, d_(L−1))` (0 if L = 1), dx of the layer being
//!   back-propagated; dx of layer 0 is not computed.
//!
//! Weights are never stored: they stream through. In the backward, dz of a hidden layer
//! overwrites that layer's output in place once dx above it is complete (the ReLU mask reads
//! the output first), so no other buffer is needed. The check refuses, in this order: a
//! program larger than the SRAM ([`MeshError::ProgramTooLarge`]), a layer whose partial-sum
//! rows do not fit beside the program ([`MeshError::LayerTooLarge`]), a model that does not
//! fit at one sample per PE ([`MeshError::ModelTooLarge`]), and more samples per PE than fit
//! ([`MeshError::SamplesExceedSram`], which names the most that fit).

use super::stream::{Layer, StreamLayout, MAX_LAYER_IDS};
use super::{Mesh, MeshError, Reduce};

/// The most layers a model may have.
pub const MAX_LAYERS: usize = 64;

/// A ReLU MLP: `dims[0]` inputs, `dims[1..L]` hidden widths (each followed by a ReLU),
/// `dims[L]` classes (logits, no activation, then softmax cross-entropy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Model<'a> {
    /// The widths, input first.
    pub dims: &'a [usize],
}

impl<'a> Model<'a> {
    /// The model with these widths.
    pub const fn new(dims: &'a [usize]) -> Self {
        Model { dims }
    }

    /// Checks there are 1..=[`MAX_LAYERS`] layers, no width is 0, and the parameter count
    /// fits `usize`.
    pub fn validate(&self) -> Result<(), MeshError> {
        if self.dims.len() < 2 {
            return Err(MeshError::NoLayers(self.dims.len()));
        }
        if self.layers() > MAX_LAYERS {
            return Err(MeshError::TooManyLayers(self.layers()));
        }
        if let Some(index) = self.dims.iter().position(|d| *d == 0) {
            return Err(MeshError::ZeroDim { index });
        }
        let mut total = 0usize;
        for l in 0..self.layers() {
            let w = Layer::new(self.dims[l], self.dims[l + 1]).words().ok_or(MeshError::SizeOverflow)?;
            total = total.checked_add(w).ok_or(MeshError::SizeOverflow)?;
        }
        // Activations of a whole batch are indexed with usize too; keep a margin.
        self.dims.iter().try_fold(0usize, |a, d| a.checked_add(*d)).ok_or(MeshError::SizeOverflow)?;
        Ok(())
    }

    /// Layers (L).
    pub const fn layers(&self) -> usize {
        self.dims.len().saturating_sub(1)
    }

    /// Layer `l`, if there is one.
    pub fn layer(&self, l: usize) -> Option<Layer> {
        Some(Layer::new(*self.dims.get(l)?, *self.dims.get(l + 1)?))
    }

    /// Whether layer `l` is followed by a ReLU: every layer but the last.
    pub const fn relu(&self, l: usize) -> bool {
        l + 1 < self.layers()
    }

    /// Classes (the last width), 0 for an empty model.
    pub fn classes(&self) -> usize {
        self.dims.last().copied().unwrap_or(0)
    }

    /// Where layer `l`'s words start in the flat parameter (or gradient) vector: the layers
    /// one after the other, each in stream order. `l = L` gives the total. Saturates at
    /// `usize::MAX` for a model that [`Model::validate`] refuses.
    pub fn param_offset(&self, l: usize) -> usize {
        (0..l.min(self.layers()))
            .map(|i| Layer::new(self.dims[i], self.dims[i + 1]).words().unwrap_or(usize::MAX))
            .fold(0, usize::saturating_add)
    }

    /// Words of all layers' parameters.
    pub fn param_words(&self) -> usize {
        self.param_offset(self.layers())
    }
}

/// One PE's SRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sram {
    /// Size in 32-bit words.
    pub words: usize,
    /// Words the PE program takes.
    pub program_words: usize,
}

impl Sram {
    /// An SRAM of `bytes` bytes (rounded down to words) holding a program of
    /// `program_words` words.
    pub const fn from_bytes(bytes: usize, program_words: usize) -> Self {
        Sram { words: bytes / 4, program_words }
    }
}

/// What the SRAM budget check found ([module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Words of the SRAM.
    pub sram_words: usize,
    /// Words of the program.
    pub program_words: usize,
    /// Words of the double-buffered partial-sum rows.
    pub psum_words: usize,
    /// Words each sample slot takes (activations and dx accumulators).
    pub words_per_sample: usize,
    /// Words used at the configured batch per PE.
    pub used_words: usize,
    /// The most samples per PE that fit.
    pub max_batch_per_pe: usize,
}

impl Budget {
    /// The budget of `model` on `sram` for `batch_per_pe` samples per PE.
    pub fn new(model: &Model<'_>, sram: &Sram, batch_per_pe: usize) -> Result<Budget, MeshError> {
        model.validate()?;
        let sram_words = sram.words;
        if sram.program_words > sram_words {
            return Err(MeshError::ProgramTooLarge { program_words: sram.program_words, sram_words });
        }
        let layers = model.layers();
        let mut widest = 0;
        for l in 0..layers {
            let row = model.dims[l].checked_add(1).ok_or(MeshError::SizeOverflow)?;
            let needed = row.checked_mul(2).and_then(|p| p.checked_add(sram.program_words));
            match needed {
                Some(n) if n <= sram_words => widest = widest.max(row),
                _ => {
                    let needed = needed.unwrap_or(usize::MAX);
                    return Err(MeshError::LayerTooLarge { layer: l, needed, sram_words });
                }
            }
        }
        let psum_words = 2 * widest;
        let acts: usize = model.dims.iter().sum();
        let dx = model.dims[1..layers].iter().copied().max().unwrap_or(0);
        let words_per_sample = acts.checked_add(dx).ok_or(MeshError::SizeOverflow)?;
        let fixed = sram.program_words + psum_words;
        let free = sram_words - fixed;
        let max_batch_per_pe = free / words_per_sample;
        if max_batch_per_pe == 0 {
            let needed = fixed.saturating_add(words_per_sample);
            return Err(MeshError::ModelTooLarge { needed, sram_words });
        }
        let used_words = batch_per_pe.checked_mul(words_per_sample).and_then(|w| w.checked_add(fixed));
        match used_words {
            Some(used) if batch_per_pe <= max_batch_per_pe => Ok(Budget {
                sram_words,
                program_words: sram.program_words,
                psum_words,
                words_per_sample,
                used_words: used,
                max_batch_per_pe,
            }),
            _ => Err(MeshError::SamplesExceedSram {
                batch_per_pe,
                max_batch_per_pe,
                needed: used_words.unwrap_or(usize::MAX),
                sram_words,
            }),
        }
    }
}

/// Everything a step needs to know besides the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Config<'a> {
    /// The mesh and the batch per PE.
    pub mesh: Mesh,
    /// The MLP.
    pub model: Model<'a>,
    /// Each PE's SRAM.
    pub sram: Sram,
    /// How layers are cut into chunks.
    pub stream: StreamLayout,
    /// The order of the batch reductions.
    pub order: Reduce,
}

impl Config<'_> {
    /// Checks the model, the mesh, that every layer can be streamed with its index as layer
    /// id, and the SRAM budget; returns the budget.
    pub fn validate(&self) -> Result<Budget, MeshError> {
        self.model.validate()?;
        self.mesh.validate()?;
        if self.model.layers() > MAX_LAYER_IDS {
            return Err(MeshError::LayerId(self.model.layers() - 1));
        }
        for l in 0..self.model.layers() {
            let layer = self.model.layer(l).ok_or(MeshError::NoLayers(self.model.dims.len()))?;
            self.stream.check(l, layer)?;
        }
        Budget::new(&self.model, &self.sram, self.mesh.batch_per_pe)
    }

    /// Checks a batch of `samples` fits the mesh (1..=PEs × batch per PE).
    pub fn check_batch(&self, samples: usize) -> Result<(), MeshError> {
        if samples == 0 {
            return Err(MeshError::EmptyBatch);
        }
        let capacity = self.mesh.capacity();
        if samples > capacity {
            return Err(MeshError::BatchTooLarge { samples, capacity });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MLP: [usize; 4] = [64, 128, 64, 10];

    fn cfg(dims: &[usize], b: usize, sram: Sram) -> Config<'_> {
        Config {
            mesh: Mesh::new(4, 4, b),
            model: Model::new(dims),
            sram,
            stream: StreamLayout::new(4),
            order: Reduce::Snake,
        }
    }

    #[test]
    fn model_shapes() {
        let m = Model::new(&MLP);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!((m.layers(), m.classes()), (3, 10));
        assert_eq!(m.layer(1), Some(Layer::new(128, 64)));
        assert_eq!(m.layer(3), None);
        assert!(m.relu(0) && m.relu(1) && !m.relu(2));
        assert_eq!(m.param_offset(1), 128 * 65);
        assert_eq!(m.param_words(), 128 * 65 + 64 * 129 + 10 * 65);
        assert_eq!(Model::new(&[3]).validate(), Err(MeshError::NoLayers(1)));
        assert_eq!(Model::new(&[]).validate(), Err(MeshError::NoLayers(0)));
        assert_eq!(Model::new(&[]).classes(), 0);
        assert_eq!(Model::new(&[3, 0, 2]).validate(), Err(MeshError::ZeroDim { index: 1 }));
        assert_eq!(Model::new(&[0, 4]).validate(), Err(MeshError::ZeroDim { index: 0 }));
        assert_eq!(Model::new(&[usize::MAX, 2]).validate(), Err(MeshError::SizeOverflow));
        assert_eq!(Model::new(&[1; 70]).validate(), Err(MeshError::TooManyLayers(69)));
    }

    #[test]
    fn sram_budget_counts_what_the_docs_say() {
        // 64→128→64→10: 266 activation words + 128 dx words per slot, psum 2·129.
        let sram = Sram::from_bytes(16 * 1024, 64);
        let b = cfg(&MLP, 4, sram).validate().unwrap();
        assert_eq!((b.sram_words, b.psum_words, b.words_per_sample), (4096, 258, 394));
        assert_eq!(b.used_words, 64 + 258 + 4 * 394);
        assert_eq!(b.max_batch_per_pe, (4096 - 64 - 258) / 394);
        assert_eq!(b.max_batch_per_pe, 9);
        // 8 KiB holds 4 samples of this model, not 5.
        let small = Sram::from_bytes(8 * 1024, 64);
        assert!(cfg(&MLP, 4, small).validate().is_ok());
        let e = cfg(&MLP, 5, small).validate().unwrap_err();
        assert_eq!(
            e,
            MeshError::SamplesExceedSram {
                batch_per_pe: 5,
                max_batch_per_pe: 4,
                needed: 64 + 258 + 5 * 394,
                sram_words: 2048
            }
        );
        // One layer only: no dx accumulators.
        let one = Budget::new(&Model::new(&[8, 3]), &sram, 1).unwrap();
        assert_eq!((one.words_per_sample, one.psum_words), (11, 18));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let sram = Sram::from_bytes(4096, 16);
        assert_eq!(
            cfg(&MLP, 1, Sram::from_bytes(4096, 2000)).validate(),
            Err(MeshError::ProgramTooLarge { program_words: 2000, sram_words: 1024 })
        );
        // A 600-wide input: 2·601 words of partial sums alone exceed 1024.
        assert_eq!(
            cfg(&[600, 4], 1, sram).validate(),
            Err(MeshError::LayerTooLarge { layer: 0, needed: 16 + 1202, sram_words: 1024 })
        );
        assert_eq!(
            cfg(&[400, 400, 10], 1, sram).validate(),
            Err(MeshError::ModelTooLarge { needed: 16 + 802 + 810 + 400, sram_words: 1024 })
        );
        assert_eq!(cfg(&MLP, 0, sram).validate(), Err(MeshError::BadBatchPerPe(0)));
        let mut c = cfg(&MLP, 1, Sram::from_bytes(16 * 1024, 0));
        c.mesh = Mesh::new(0, 2, 1);
        assert_eq!(c.validate(), Err(MeshError::BadMesh { rows: 0, cols: 2 }));
        c.mesh = Mesh::new(2, 2, 1);
        c.stream = StreamLayout::new(0);
        assert_eq!(c.validate(), Err(MeshError::ZeroRowsPerChunk));
        c.stream = StreamLayout::new(1);
        assert_eq!(c.check_batch(0), Err(MeshError::EmptyBatch));
        assert_eq!(c.check_batch(5), Err(MeshError::BatchTooLarge { samples: 5, capacity: 4 }));
        assert_eq!(c.check_batch(3), Ok(()));
        assert_eq!(
            Budget::new(&Model::new(&[4, 4]), &Sram::from_bytes(4096, 0), usize::MAX),
            Err(MeshError::SamplesExceedSram {
                batch_per_pe: usize::MAX,
                max_batch_per_pe: (1024 - 10) / 8,
                needed: usize::MAX,
                sram_words: 1024
            })
        );
    }
}
