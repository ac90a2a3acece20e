//! Where things sit on the mesh: PE coordinates, the snake order of the PEs, and the
//! placement of a batch's samples on them.
//!
//! PE `(row, col)` has row 0 at the north edge and column 0 at the west edge. The **snake**
//! visits every PE once, each step a single hop to a neighbour: row 0 from west to east, row 1
//! from east to west, and so on (boustrophedon). For a 2×3 mesh:
//!
//! ```text
//!         col 0   col 1   col 2
//! row 0   [0] ──► [1] ──► [2]
//!                          │
//! row 1   [5] ◄── [4] ◄── [3]
//! ```
//!
//! Sample `s` of a batch sits on the PE at snake position `s / B` (`B` the batch per PE), in
//! slot `s % B`. So the samples are in increasing order along the snake, which is what makes
//! [`Reduce::Snake`] one FMA chain over the batch. A batch smaller than
//! PEs × B leaves the last slots (and perhaps PEs) empty.

use super::{MeshError, Reduce};
use core::ops::Range;

/// The largest mesh side the model accepts.
pub const MAX_SIDE: usize = 64;
/// The largest batch per PE the model accepts.
pub const MAX_BATCH_PER_PE: usize = 1024;

/// A PE's coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pe {
    /// Row, 0 at the north edge.
    pub row: usize,
    /// Column, 0 at the west edge.
    pub col: usize,
}

/// Where one sample sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The PE.
    pub pe: Pe,
    /// The PE's position along the snake.
    pub pos: usize,
    /// The slot inside the PE (0..B).
    pub slot: usize,
}

/// The mesh geometry: P×Q PEs and the batch per PE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mesh {
    /// PE rows (P).
    pub rows: usize,
    /// PE columns (Q).
    pub cols: usize,
    /// Sample slots per PE (B): the arithmetic intensity of the weight stream.
    pub batch_per_pe: usize,
}

impl Mesh {
    /// A `rows` × `cols` mesh with `batch_per_pe` slots per PE.
    pub const fn new(rows: usize, cols: usize, batch_per_pe: usize) -> Self {
        Mesh { rows, cols, batch_per_pe }
    }

    /// Checks the sides (1..=[`MAX_SIDE`]) and the batch per PE (1..=[`MAX_BATCH_PER_PE`]).
    pub fn validate(&self) -> Result<(), MeshError> {
        let side = 1..=MAX_SIDE;
        if !side.contains(&self.rows) || !side.contains(&self.cols) {
            return Err(MeshError::BadMesh { rows: self.rows, cols: self.cols });
        }
        if !(1..=MAX_BATCH_PER_PE).contains(&self.batch_per_pe) {
            return Err(MeshError::BadBatchPerPe(self.batch_per_pe));
        }
        Ok(())
    }

    /// PEs in the mesh.
    pub const fn pes(&self) -> usize {
        self.rows.saturating_mul(self.cols)
    }

    /// Samples the mesh holds: PEs × batch per PE.
    pub const fn capacity(&self) -> usize {
        self.pes().saturating_mul(self.batch_per_pe)
    }

    /// The PE at position `pos` of the snake, if there is one.
    pub const fn snake_pe(&self, pos: usize) -> Option<Pe> {
        if self.cols == 0 || pos >= self.pes() {
            return None;
        }
        let row = pos / self.cols;
        let step = pos % self.cols;
        let col = if row.is_multiple_of(2) { step } else { self.cols - 1 - step };
        Some(Pe { row, col })
    }

    /// The snake position of `pe`, if it is in the mesh.
    pub const fn snake_pos(&self, pe: Pe) -> Option<usize> {
        if pe.row >= self.rows || pe.col >= self.cols {
            return None;
        }
        let step = if pe.row.is_multiple_of(2) { pe.col } else { self.cols - 1 - pe.col };
        Some(pe.row.saturating_mul(self.cols).saturating_add(step))
    }

    /// Where sample `sample` sits, if the mesh has room for it.
    pub const fn place(&self, sample: usize) -> Option<Placement> {
        if self.batch_per_pe == 0 {
            return None;
        }
        let pos = sample / self.batch_per_pe;
        match self.snake_pe(pos) {
            Some(pe) => Some(Placement { pe, pos, slot: sample % self.batch_per_pe }),
            None => None,
        }
    }

    /// The samples (of a batch of `samples`) held by the PE at snake position `pos`, in slot
    /// order. Empty for a PE past the end of the batch.
    pub fn samples_at(&self, pos: usize, samples: usize) -> Range<usize> {
        let start = pos.saturating_mul(self.batch_per_pe).min(samples);
        let end = start.saturating_add(self.batch_per_pe).min(samples);
        start..end
    }

    /// The PE where the reduced gradients and metrics leave the mesh for `order`: the end of
    /// the snake for [`Reduce::Snake`], the north-west corner for [`Reduce::RowCol`].
    pub const fn exit_pe(&self, order: Reduce) -> Pe {
        match order {
            Reduce::RowCol => Pe { row: 0, col: 0 },
            Reduce::Snake => match self.snake_pe(self.pes().saturating_sub(1)) {
                Some(pe) => pe,
                None => Pe { row: 0, col: 0 },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_visits_every_pe_once_by_neighbour_hops() {
        for (p, q) in [(1, 1), (1, 5), (3, 1), (2, 3), (4, 4), (3, 5), (8, 8)] {
            let m = Mesh::new(p, q, 1);
            let mut seen = [[false; 8]; 8];
            let mut prev: Option<Pe> = None;
            for pos in 0..m.pes() {
                let pe = m.snake_pe(pos).unwrap();
                assert!(!seen[pe.row][pe.col], "{p}x{q}: {pe:?} twice");
                seen[pe.row][pe.col] = true;
                assert_eq!(m.snake_pos(pe), Some(pos));
                if let Some(a) = prev {
                    let hop = a.row.abs_diff(pe.row) + a.col.abs_diff(pe.col);
                    assert_eq!(hop, 1, "{p}x{q}: {a:?} -> {pe:?}");
                }
                prev = Some(pe);
            }
            assert_eq!(m.snake_pe(m.pes()), None);
            assert_eq!(m.snake_pos(Pe { row: p, col: 0 }), None);
        }
        // The 2×3 picture of the module docs.
        let m = Mesh::new(2, 3, 1);
        let order: [(usize, usize); 6] = [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)];
        for (pos, (row, col)) in order.iter().enumerate() {
            assert_eq!(m.snake_pe(pos), Some(Pe { row: *row, col: *col }));
        }
        assert_eq!(m.exit_pe(Reduce::Snake), Pe { row: 1, col: 0 });
        assert_eq!(Mesh::new(3, 3, 1).exit_pe(Reduce::Snake), Pe { row: 2, col: 2 });
        assert_eq!(m.exit_pe(Reduce::RowCol), Pe { row: 0, col: 0 });
    }

    #[test]
    fn samples_fill_slots_along_the_snake() {
        let m = Mesh::new(2, 2, 3);
        assert_eq!(m.capacity(), 12);
        let p = m.place(7).unwrap();
        assert_eq!((p.pos, p.slot, p.pe), (2, 1, Pe { row: 1, col: 1 }));
        assert_eq!(m.place(12), None);
        assert_eq!(m.samples_at(0, 12), 0..3);
        assert_eq!(m.samples_at(3, 12), 9..12);
        // A partial batch of 7: PE 2 holds one sample, PE 3 none.
        assert_eq!(m.samples_at(2, 7), 6..7);
        assert_eq!(m.samples_at(3, 7), 7..7);
        assert_eq!(m.samples_at(usize::MAX, 7), 7..7);
        assert!(Mesh::new(0, 4, 1).validate().is_err());
        assert!(Mesh::new(4, 65, 1).validate().is_err());
        assert_eq!(Mesh::new(4, 4, 0).validate(), Err(MeshError::BadBatchPerPe(0)));
        assert_eq!(Mesh::new(4, 4, 0).place(0), None);
        assert_eq!(Mesh::new(1, 0, 1).snake_pe(0), None);
        assert!(Mesh::new(8, 8, 8).validate().is_ok());
    }
}
