//! A layer's words on the weight stream and the gradient stream, and their flits
//! ([`crate::flit`]).
//!
//! A dense layer with K inputs and M outputs is M **rows** of K + 1 words, bias first:
//!
//! ```text
//! word  0        1        …   K          K+1      K+2      …   2K+1       …
//!      [b_0,     w_0,0,   …,  w_0,K−1,   b_1,     w_1,0,   …,  w_1,K−1,   …]
//!       └────────── row 0 ─────────┘      └────────── row 1 ─────────┘
//! ```
//!
//! so word `i·(K+1)` is `b_i` and word `i·(K+1) + 1 + k` is `w_ik` ([`Layer::bias`],
//! [`Layer::weight`]). MemoryX stores a layer's parameters in this order, streams them in
//! it (forward, and again backward), and receives the gradient in it: `db_i` and `dW_ik`
//! take the place of `b_i` and `w_ik`. The bias comes first because the forward FMA chain of
//! row i starts from it.
//!
//! The stream is cut into **chunks** of `rows_per_chunk` whole rows (the last chunk may be
//! shorter). Flit `index` counts the words of a chunk from 0, `chunk` counts the chunks of
//! the layer from 0, and `last` closes each chunk. One fp32 word per flit.

use super::MeshError;
use crate::flit::{Flit, Header, Kind};

/// Flits a chunk may hold: the 16-bit `index` field counts 0..=65 535.
pub const MAX_CHUNK_FLITS: usize = 1 << crate::flit::INDEX_WIDTH;
/// Chunks a layer may have: the 16-bit `chunk` field.
pub const MAX_CHUNKS: usize = 1 << crate::flit::CHUNK_WIDTH;
/// Layer ids the 12-bit `layer` field can carry.
pub const MAX_LAYER_IDS: usize = 1 << crate::flit::LAYER_WIDTH;

/// The shape of one dense layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layer {
    /// K: the input width.
    pub inputs: usize,
    /// M: the output width (rows on the stream).
    pub outputs: usize,
}

impl Layer {
    /// A layer with `inputs` inputs and `outputs` outputs.
    pub const fn new(inputs: usize, outputs: usize) -> Self {
        Layer { inputs, outputs }
    }

    /// Words of one row: the bias and K weights.
    pub const fn row_words(&self) -> usize {
        self.inputs.saturating_add(1)
    }

    /// Words of the whole layer, M·(K+1), or `None` if that overflows.
    pub const fn words(&self) -> Option<usize> {
        match self.inputs.checked_add(1) {
            Some(r) => self.outputs.checked_mul(r),
            None => None,
        }
    }

    /// Word of `b_row`.
    pub const fn bias(&self, row: usize) -> usize {
        row.saturating_mul(self.row_words())
    }

    /// Word of `w_row,k`.
    pub const fn weight(&self, row: usize, k: usize) -> usize {
        self.bias(row).saturating_add(1).saturating_add(k)
    }
}

/// Where a word sits in its chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// The chunk of the layer.
    pub chunk: u16,
    /// The flit index inside the chunk.
    pub index: u16,
    /// The word closes its chunk.
    pub last: bool,
}

/// How layers are cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamLayout {
    /// Whole rows per chunk (≥ 1).
    pub rows_per_chunk: usize,
}

impl StreamLayout {
    /// Chunks of `rows_per_chunk` rows.
    pub const fn new(rows_per_chunk: usize) -> Self {
        StreamLayout { rows_per_chunk }
    }

    /// Checks that layer `index` (its id on the wire) can be streamed: a full chunk fits the
    /// flit index and the chunk count fits the chunk field.
    pub fn check(&self, index: usize, layer: Layer) -> Result<(), MeshError> {
        if self.rows_per_chunk == 0 {
            return Err(MeshError::ZeroRowsPerChunk);
        }
        let rows = self.rows_per_chunk.min(layer.outputs.max(1));
        let words = rows.checked_mul(layer.row_words()).ok_or(MeshError::SizeOverflow)?;
        if words > MAX_CHUNK_FLITS {
            return Err(MeshError::ChunkTooLarge { layer: index, words });
        }
        let chunks = self.chunks(layer);
        if chunks > MAX_CHUNKS {
            return Err(MeshError::TooManyChunks { layer: index, chunks });
        }
        Ok(())
    }

    /// Chunks of `layer`: ⌈M / rows_per_chunk⌉.
    pub const fn chunks(&self, layer: Layer) -> usize {
        if self.rows_per_chunk == 0 {
            return 0;
        }
        layer.outputs.div_ceil(self.rows_per_chunk)
    }

    /// The chunk, index and `last` of word `word` of `layer`, if the layer has that word and
    /// the layout can carry it ([`StreamLayout::check`]).
    pub fn position(&self, layer: Layer, word: usize) -> Option<Position> {
        let total = layer.words()?;
        if word >= total || self.rows_per_chunk == 0 {
            return None;
        }
        let chunk_words = self.rows_per_chunk.checked_mul(layer.row_words())?;
        let chunk = word / chunk_words;
        let index = word % chunk_words;
        let chunk_end = (chunk + 1).saturating_mul(chunk_words).min(total);
        if chunk >= MAX_CHUNKS || index >= MAX_CHUNK_FLITS {
            return None;
        }
        Some(Position { chunk: chunk as u16, index: index as u16, last: word + 1 == chunk_end })
    }

    /// The flits of `values` (the words of `layer`, in stream order) with header kind `kind`,
    /// layer id `layer_id` and `step`: the weight ingress stream ([`Kind::Weight`]) or the
    /// gradient egress stream ([`Kind::Gradient`]) of one layer.
    pub fn flits<'a>(
        &self,
        kind: Kind,
        layer_id: usize,
        step: u16,
        layer: Layer,
        values: &'a [u32],
    ) -> Result<LayerFlits<'a>, MeshError> {
        self.check(layer_id, layer)?;
        if layer_id >= MAX_LAYER_IDS {
            return Err(MeshError::LayerId(layer_id));
        }
        let expected = layer.words().ok_or(MeshError::SizeOverflow)?;
        if values.len() != expected {
            return Err(MeshError::Length { what: "layer", expected, got: values.len() });
        }
        Ok(LayerFlits { layout: *self, kind, layer_id: layer_id as u16, step, layer, values, next: 0 })
    }
}

/// The flits of one layer in stream order ([`StreamLayout::flits`]).
#[derive(Debug, Clone)]
pub struct LayerFlits<'a> {
    layout: StreamLayout,
    kind: Kind,
    layer_id: u16,
    step: u16,
    layer: Layer,
    values: &'a [u32],
    next: usize,
}

impl Iterator for LayerFlits<'_> {
    type Item = Flit;

    fn next(&mut self) -> Option<Flit> {
        let payload = *self.values.get(self.next)?;
        let pos = self.layout.position(self.layer, self.next)?;
        self.next += 1;
        let header = Header::new(self.kind, self.layer_id, self.step, pos.chunk, pos.index);
        Some(Flit { header, payload, last: pos.last })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.values.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for LayerFlits<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_chunks() {
        let l = Layer::new(3, 5); // rows of 4 words, 20 words
        assert_eq!((l.row_words(), l.words(), l.bias(2), l.weight(2, 1)), (4, Some(20), 8, 10));
        let s = StreamLayout::new(2); // chunks of 8 words: 8, 8, 4
        assert_eq!(s.chunks(l), 3);
        assert_eq!(s.position(l, 0), Some(Position { chunk: 0, index: 0, last: false }));
        assert_eq!(s.position(l, 7), Some(Position { chunk: 0, index: 7, last: true }));
        assert_eq!(s.position(l, 8), Some(Position { chunk: 1, index: 0, last: false }));
        assert_eq!(s.position(l, 19), Some(Position { chunk: 2, index: 3, last: true }));
        assert_eq!(s.position(l, 20), None);
        let vals: [u32; 20] = core::array::from_fn(|i| i as u32 * 3);
        let flits = s.flits(Kind::Gradient, 2, 9, l, &vals).unwrap();
        assert_eq!(flits.len(), 20);
        let mut lasts = 0;
        for (w, f) in flits.enumerate() {
            assert_eq!(f.payload, vals[w]);
            let p = s.position(l, w).unwrap();
            assert_eq!(f.header, Header::new(Kind::Gradient, 2, 9, p.chunk, p.index));
            lasts += usize::from(f.last);
        }
        assert_eq!(lasts, 3);
    }

    #[test]
    fn limits_are_errors() {
        assert_eq!(StreamLayout::new(0).check(0, Layer::new(4, 4)), Err(MeshError::ZeroRowsPerChunk));
        assert_eq!(StreamLayout::new(0).chunks(Layer::new(4, 4)), 0);
        // 2 rows of 40 000 words exceed the 16-bit index; 1 row fits.
        assert_eq!(
            StreamLayout::new(2).check(1, Layer::new(39_999, 4)),
            Err(MeshError::ChunkTooLarge { layer: 1, words: 80_000 })
        );
        assert!(StreamLayout::new(1).check(1, Layer::new(39_999, 4)).is_ok());
        // A chunk larger than the layer is only as large as the layer.
        assert!(StreamLayout::new(1000).check(0, Layer::new(1000, 10)).is_ok());
        assert_eq!(
            StreamLayout::new(1).check(3, Layer::new(1, 70_000)),
            Err(MeshError::TooManyChunks { layer: 3, chunks: 70_000 })
        );
        let l = Layer::new(2, 2);
        assert!(matches!(
            StreamLayout::new(1).flits(Kind::Weight, 0, 0, l, &[0; 5]),
            Err(MeshError::Length { .. })
        ));
        assert!(StreamLayout::new(1).flits(Kind::Weight, 4096, 0, l, &[0; 6]).is_err());
        assert_eq!(Layer::new(usize::MAX, 2).words(), None);
        assert_eq!(StreamLayout::new(1).position(Layer::new(usize::MAX, 2), 0), None);
    }
}
