//! Which of MemoryX's constant slots each layer of a run uses, and when the constants are
//! computed (docs/memoryx-store.md "The layer table and registers": a gradient chunk takes the
//! slot its layer's STEP names when its header arrives; a slot may be overwritten once every
//! chunk of the step that used it has retired).
//!
//! Computing one step's constants (`golden::optim::step_consts`: the schedule, the bias
//! corrections, in software floating point) costs the core about 9,000 cycles, so:
//!
//! - layers whose constants are equal (the same optimizer, schedule, workers and batch) share
//!   a slot, and the constants are computed once per group of them;
//! - with room for two slots per group, step t + 1's constants go into the group's idle slot
//!   while step t runs (`prefetch`), so a step of a run only names its slot in STEP.
//!   Otherwise each step writes its slot before it starts, as a single `MeshTrain` does.

use ws_common::mesh::GSEG;

use crate::hal::mx::MemoryX;
use crate::mx::Layer;

/// The constant slots of a run's layers.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepSlots {
    /// Each layer's group: the index of its equal-constants group.
    group: [u8; GSEG],
    /// The first layer of each group (its constants stand for the group's).
    first: [u8; GSEG],
    groups: usize,
    layers: usize,
    /// Two slots per group: the next step's constants are written while a step runs.
    double: bool,
    /// The step whose constants are in their slots.
    ready: Option<u32>,
}

/// Two layers take the same constants at every step.
fn same_consts(a: &Layer, b: &Layer) -> bool {
    a.hyper == b.hyper && a.schedule == b.schedule && a.workers == b.workers && a.batch == b.batch
}

impl StepSlots {
    /// The slots of `layers` on a MemoryX with `slots` constant slots, or `None` when even one
    /// slot per group does not fit.
    pub(super) fn new(layers: &[Layer], slots: u32) -> Option<Self> {
        let mut s = StepSlots {
            group: [0; GSEG],
            first: [0; GSEG],
            groups: 0,
            layers: layers.len().min(GSEG),
            double: false,
            ready: None,
        };
        for (l, layer) in layers.iter().enumerate().take(GSEG) {
            let g = match (0..s.groups).find(|&g| same_consts(&layers[usize::from(s.first[g])], layer)) {
                Some(g) => g,
                None => {
                    s.first[s.groups] = l as u8;
                    s.groups += 1;
                    s.groups - 1
                }
            };
            s.group[l] = g as u8;
        }
        let groups = s.groups as u32;
        if groups > slots {
            return None;
        }
        s.double = 2 * groups <= slots;
        Some(s)
    }

    /// Whether each group has two slots, so step t + 1's constants are written while step t
    /// runs.
    pub(super) fn double(&self) -> bool {
        self.double
    }

    /// Layer `l`'s slot at step `t`.
    pub(super) fn slot(&self, l: usize, t: u32) -> u32 {
        let g = u32::from(self.group[l]);
        if self.double {
            2 * g + (t & 1)
        } else {
            g
        }
    }

    /// Writes step `t`'s constants into their slots, unless they are there already. Every
    /// chunk of the steps that used those slots before must have retired.
    pub(super) fn write(&mut self, mx: &mut MemoryX, layers: &[Layer], t: u32) {
        if self.ready == Some(t) {
            return;
        }
        for g in 0..self.groups {
            let l = usize::from(self.first[g]);
            mx.write_slot(self.slot(l, t) as usize, &layers[l].consts(t));
        }
        self.ready = Some(t);
    }

    /// While step `t` runs: writes step `t + 1`'s constants into the idle slots when there are
    /// two per group (step t − 1, the last user of those slots, has retired).
    pub(super) fn prefetch(&mut self, mx: &mut MemoryX, layers: &[Layer], t: u32) {
        if self.double && self.ready == Some(t) {
            if let Some(next) = t.checked_add(1) {
                // `ready` names the newest step written; step t's slots stay as they are.
                self.write(mx, layers, next);
            }
        }
    }

    /// Names step `t`'s slot in layer `l`'s STEP alone (its constants must be written, and
    /// the layer's chunks of the step before must have retired).
    pub(super) fn name_layer(&self, mx: &mut MemoryX, l: usize, t: u32) {
        mx.set_step(l, t, self.slot(l, t));
    }

    /// Names step `t`'s slot in every layer's STEP (its constants must be written).
    pub(super) fn name(&self, mx: &mut MemoryX, t: u32) {
        for l in 0..self.layers {
            mx.set_step(l, t, self.slot(l, t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ws_common::ctrl::cmd::MxLayerInfo;
    use ws_common::golden::optim::Hyper;
    use ws_common::golden::schedule::Schedule;

    fn layer(hyper: Hyper, batch: u32) -> Layer {
        Layer {
            len: 10,
            info: MxLayerInfo::default(),
            arrays: 1,
            hyper,
            schedule: Schedule::constant(0.01),
            workers: 2,
            batch,
            at: 0,
        }
    }

    #[test]
    fn equal_layers_share_a_slot_pair_and_steps_alternate() {
        let layers =
            [layer(Hyper::ADAM, 16), layer(Hyper::ADAM, 16), layer(Hyper::SGD, 16), layer(Hyper::ADAM, 8)];
        let s = StepSlots::new(&layers, 8).unwrap();
        assert!(s.double, "three groups take six of eight slots");
        let at = |t: u32| (0..4).map(|l| s.slot(l, t)).collect::<std::vec::Vec<_>>();
        assert_eq!(at(1), [1, 1, 3, 5]);
        assert_eq!(at(2), [0, 0, 2, 4], "step t + 1 writes the slots step t does not use");

        let s = StepSlots::new(&layers, 5).unwrap();
        assert!(!s.double, "without room for two, a group keeps one slot");
        assert_eq!((s.slot(0, 1), s.slot(2, 2), s.slot(3, 3)), (0, 1, 2));

        assert!(StepSlots::new(&layers, 2).is_none(), "three groups need three slots");
        let distinct: std::vec::Vec<_> = (0..GSEG as u32).map(|b| layer(Hyper::ADAM, b + 1)).collect();
        assert_eq!(StepSlots::new(&distinct, 8).map(|s| s.double), Some(false));
    }
}
