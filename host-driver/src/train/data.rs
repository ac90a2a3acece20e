//! The data a `wsctl train` run learns from, and its stratified train/test split.
//!
//! A data set is a safetensors file with two tensors:
//!
//! - `x`: N × D, F32 (or U8, converted exactly), one row per sample;
//! - `y`: N labels, U8 or U32, numbered 0 to classes − 1.
//!
//! If the file's metadata has a `scale`, `x` is divided by it (the digits store pixel counts
//! 0..16 with `scale` "16"). The built-in digits (data/digits/, UCI's optdigits test set,
//! CC BY 4.0) are compiled into the library: [`Dataset::digits`].
//!
//! [`Dataset::split`] puts the same share of every class into the test set, shuffled with the
//! run's seed, so a small class is not left out of either side by chance; the scikit-learn
//! baseline (data/digits/sklearn_baseline.py) reads the same split from [`Split::to_json`].

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::Serialize;

use super::rng::Rng;

/// The built-in digits file (data/digits/README.md).
const DIGITS: &[u8] = include_bytes!("../../../data/digits/digits.safetensors");

/// The most classes a data set may have: labels fit in 16 bits.
pub const MAX_CLASSES: usize = 1 << 16;

/// The fewest samples of each class: one for the train set and one for the test set.
pub const MIN_PER_CLASS: usize = 2;

/// What is wrong with a data set file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// could not read {} ({source}): check the path, or leave the data set out to train on the built-in digits
    #[error(
        "could not read {} ({source}): check the path, or leave the data set out to train on the built-in digits",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// {what} is not a safetensors file ({reason}): save it with `safetensors.numpy.save_file({{"x": x, "y": y}}, path)`
    #[error(
        "{what} is not a safetensors file ({reason}): save it with `safetensors.numpy.save_file({{\"x\": x, \"y\": y}}, path)`"
    )]
    NotSafetensors {
        /// The file.
        what: String,
        /// What the safetensors crate reported.
        reason: String,
    },
    /// {what} has no tensor `{tensor}` (it has {found}): a data set needs `x` (samples × features) and `y` (one label per sample)
    #[error(
        "{what} has no tensor `{tensor}` (it has {found}): a data set needs `x` (samples × features) and `y` (one label per sample)"
    )]
    Missing {
        /// The file.
        what: String,
        /// The tensor not found: "x" or "y".
        tensor: &'static str,
        /// The tensors the file has, comma-separated, or "no tensors".
        found: String,
    },
    /// {what}: tensor `{tensor}` has shape {shape:?} but must have {rank} dimension(s), {expected}: reshape it before saving
    #[error(
        "{what}: tensor `{tensor}` has shape {shape:?} but must have {rank} dimension(s), {expected}: reshape it before saving"
    )]
    Rank {
        /// The file.
        what: String,
        /// The tensor: "x" or "y".
        tensor: &'static str,
        /// Its shape.
        shape: Vec<usize>,
        /// The rank it must have.
        rank: usize,
        /// The shape it must have, in words.
        expected: &'static str,
    },
    /// {what}: tensor `{tensor}` is {dtype}, but only {accepted} are accepted: convert it before saving, e.g. `{fix}`
    #[error(
        "{what}: tensor `{tensor}` is {dtype}, but only {accepted} are accepted: convert it before saving, e.g. `{fix}`"
    )]
    Dtype {
        /// The file.
        what: String,
        /// The tensor: "x" or "y".
        tensor: &'static str,
        /// Its dtype as the file names it.
        dtype: String,
        /// The dtypes accepted for this tensor.
        accepted: &'static str,
        /// The numpy call that converts it.
        fix: &'static str,
    },
    /// {what}: `x` has {x_rows} samples but `y` has {y_len} labels: give one label per row of `x`
    #[error("{what}: `x` has {x_rows} samples but `y` has {y_len} labels: give one label per row of `x`")]
    Count {
        /// The file.
        what: String,
        /// Rows of x.
        x_rows: usize,
        /// Labels in y.
        y_len: usize,
    },
    /// {what}: `x` has shape {shape:?}, which holds no data: a data set needs at least one sample with at least one feature
    #[error(
        "{what}: `x` has shape {shape:?}, which holds no data: a data set needs at least one sample with at least one feature"
    )]
    Empty {
        /// The file.
        what: String,
        /// The shape of x.
        shape: Vec<usize>,
    },
    /// {what}: the `scale` metadata "{value}" {reason}: set it to a finite positive number (x is divided by it), or leave it out
    #[error(
        "{what}: the `scale` metadata \"{value}\" {reason}: set it to a finite positive number (x is divided by it), or leave it out"
    )]
    Scale {
        /// The file.
        what: String,
        /// The metadata's text.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// {what}: `x` of sample {sample}, feature {feature} is {value}: every value must be finite; replace NaN and infinities (e.g. `numpy.nan_to_num(x)`) before saving
    #[error(
        "{what}: `x` of sample {sample}, feature {feature} is {value}: every value must be finite; replace NaN and infinities (e.g. `numpy.nan_to_num(x)`) before saving"
    )]
    NonFinite {
        /// The file.
        what: String,
        /// The sample (row of x).
        sample: usize,
        /// The feature (column of x).
        feature: usize,
        /// The value found.
        value: f32,
    },
    /// {what}: every label is {label}, so there is nothing to tell apart: training needs at least 2 classes, labelled 0 to classes − 1
    #[error(
        "{what}: every label is {label}, so there is nothing to tell apart: training needs at least 2 classes, labelled 0 to classes − 1"
    )]
    OneClass {
        /// The file.
        what: String,
        /// The only label.
        label: u32,
    },
    /// {what}: label {label} of sample {sample} is too large: at most 65536 classes are supported, labelled 0 to 65535; number the classes 0, 1, 2, … in order
    #[error(
        "{what}: label {label} of sample {sample} is too large: at most 65536 classes are supported, labelled 0 to 65535; number the classes 0, 1, 2, … in order"
    )]
    LabelTooLarge {
        /// The file.
        what: String,
        /// The sample.
        sample: usize,
        /// Its label.
        label: u32,
    },
    /// {what}: class {class} has {count} sample(s), but a train/test split needs at least 2 of every class (one per side), and labels 0 to {last} make {classes} classes: add samples of class {class}, or renumber the labels 0, 1, 2, … without gaps
    #[error(
        "{what}: class {class} has {count} sample(s), but a train/test split needs at least 2 of every class (one per side), and labels 0 to {last} make {classes} classes: add samples of class {class}, or renumber the labels 0, 1, 2, … without gaps"
    )]
    ClassTooSmall {
        /// The file.
        what: String,
        /// The class.
        class: u32,
        /// Its samples.
        count: usize,
        /// Classes in the file (the largest label + 1).
        classes: usize,
        /// The largest label.
        last: usize,
    },
}

/// A data set in memory: features scaled and checked, labels 0 to `classes` − 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// A short name for reports: "digits", or the file's stem.
    pub name: String,
    /// The features, `n` × `d` row-major, already scaled, all finite.
    pub x: Vec<f32>,
    /// The labels, `n` of them, each below `classes`.
    pub y: Vec<u32>,
    /// Samples.
    pub n: usize,
    /// Features per sample.
    pub d: usize,
    /// Classes: the largest label + 1; every class has at least [`MIN_PER_CLASS`] samples.
    pub classes: usize,
}

/// A train/test split: sample indices, each ascending, disjoint, together all samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Split {
    /// The samples trained on.
    pub train: Vec<usize>,
    /// The samples held out for the test loss and accuracy.
    pub test: Vec<usize>,
}

impl Split {
    /// `{"train": [...], "test": [...]}`: what data/digits/sklearn_baseline.py's `--split` reads.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a struct of integer lists always serialises")
    }
}

impl Dataset {
    /// The built-in digits: 1,797 8×8 images of handwritten digits, pixels scaled to [0, 1]
    /// (counts 0..16 divided by 16, exact in f32), 10 classes (data/digits/README.md).
    pub fn digits() -> Dataset {
        Dataset::parse(DIGITS, "digits", "the built-in digits")
            .expect("data/digits/digits.safetensors is checked by the unit tests")
    }

    /// Reads a data set from a safetensors file (the module documentation gives the format).
    pub fn load(path: &Path) -> Result<Dataset, DataError> {
        let bytes = std::fs::read(path).map_err(|source| DataError::Read { path: path.into(), source })?;
        let name = path.file_stem().map_or_else(|| "data".into(), |s| s.to_string_lossy().into_owned());
        Dataset::parse(&bytes, &name, &path.display().to_string())
    }

    /// Parses the bytes of a data set file; `what` names the file in errors.
    pub fn parse(bytes: &[u8], name: &str, what: &str) -> Result<Dataset, DataError> {
        let not_safetensors = |e: safetensors::SafeTensorError| DataError::NotSafetensors {
            what: what.into(),
            reason: e.to_string(),
        };
        let file = SafeTensors::deserialize(bytes).map_err(not_safetensors)?;
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(not_safetensors)?;
        let metadata = header.metadata().clone().unwrap_or_default();

        let x_view = tensor(&file, what, "x")?;
        let y_view = tensor(&file, what, "y")?;
        let &[n, d] = x_view.shape() else {
            return Err(DataError::Rank {
                what: what.into(),
                tensor: "x",
                shape: x_view.shape().to_vec(),
                rank: 2,
                expected: "samples × features",
            });
        };
        let &[y_len] = y_view.shape() else {
            return Err(DataError::Rank {
                what: what.into(),
                tensor: "y",
                shape: y_view.shape().to_vec(),
                rank: 1,
                expected: "one label per sample",
            });
        };
        let mut x = x_values(&x_view, what)?;
        let y = y_values(&y_view, what)?;
        if n != y_len {
            return Err(DataError::Count { what: what.into(), x_rows: n, y_len });
        }
        if n == 0 || d == 0 {
            return Err(DataError::Empty { what: what.into(), shape: vec![n, d] });
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NonFinite {
                what: what.into(),
                sample: i / d,
                feature: i % d,
                value: x[i],
            });
        }
        if let Some(text) = metadata.get("scale") {
            apply_scale(&mut x, d, text, what)?;
        }
        let classes = check_labels(&y, what)?;
        Ok(Dataset { name: name.into(), x, y, n, d, classes })
    }

    /// The features of sample `i` (`d` values).
    pub fn sample(&self, i: usize) -> &[f32] {
        &self.x[i * self.d..(i + 1) * self.d]
    }

    /// The label of sample `i`.
    pub fn label(&self, i: usize) -> u32 {
        self.y[i]
    }

    /// Samples per class, indexed by label.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes];
        for &label in &self.y {
            counts[label as usize] += 1;
        }
        counts
    }

    /// One line for people: "digits: 1797 samples × 64 features, 10 classes".
    pub fn describe(&self) -> String {
        format!("{}: {} samples × {} features, {} classes", self.name, self.n, self.d, self.classes)
    }

    /// A stratified split: `test_fraction` of every class goes to the test set.
    ///
    /// For each class in label order, that class's samples are shuffled with an [`Rng`]
    /// seeded with `seed` (one generator for all classes), round(count × `test_fraction`) of
    /// them go to the test set and the rest to the train set. Each side keeps at least one
    /// sample of every class (a load guarantees [`MIN_PER_CLASS`]), so a fraction near 0 or 1
    /// still leaves each class on both sides; a `test_fraction` outside (0, 1) is a caller's
    /// mistake that this clamping only keeps harmless. Both lists come back ascending. The same
    /// seed gives the same split on every platform.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Split {
        let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); self.classes];
        for (i, &label) in self.y.iter().enumerate() {
            by_class[label as usize].push(i);
        }
        let mut rng = Rng::new(seed);
        let (mut train, mut test) = (Vec::new(), Vec::new());
        for mut members in by_class {
            rng.shuffle(&mut members);
            let count = members.len();
            // `as` saturates: a NaN fraction gives 0, then the clamp makes it 1.
            let held_out =
                ((count as f64 * test_fraction).round() as usize).clamp(1, count.saturating_sub(1).max(1));
            test.extend_from_slice(&members[..held_out]);
            train.extend_from_slice(&members[held_out..]);
        }
        train.sort_unstable();
        test.sort_unstable();
        Split { train, test }
    }
}

/// The tensor `name`, or an error listing the tensors the file has.
fn tensor<'a>(file: &SafeTensors<'a>, what: &str, name: &'static str) -> Result<TensorView<'a>, DataError> {
    file.tensor(name).map_err(|_| {
        let mut names = file.names();
        names.sort_unstable();
        let found = if names.is_empty() {
            "no tensors".to_string()
        } else {
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        };
        DataError::Missing { what: what.into(), tensor: name, found }
    })
}

/// x's values as f32: F32 as stored (little-endian, safetensors' byte order), U8 exactly.
fn x_values(view: &TensorView<'_>, what: &str) -> Result<Vec<f32>, DataError> {
    let data = view.data();
    match view.dtype() {
        Dtype::F32 => {
            Ok(data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
        }
        Dtype::U8 => Ok(data.iter().map(|&b| f32::from(b)).collect()),
        other => Err(DataError::Dtype {
            what: what.into(),
            tensor: "x",
            dtype: format!("{other:?}"),
            accepted: "F32 and U8",
            fix: "x.astype(numpy.float32)",
        }),
    }
}

/// y's labels: U8 or U32.
fn y_values(view: &TensorView<'_>, what: &str) -> Result<Vec<u32>, DataError> {
    let data = view.data();
    match view.dtype() {
        Dtype::U8 => Ok(data.iter().map(|&b| u32::from(b)).collect()),
        Dtype::U32 => {
            Ok(data.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
        }
        other => Err(DataError::Dtype {
            what: what.into(),
            tensor: "y",
            dtype: format!("{other:?}"),
            accepted: "U8 and U32",
            fix: "y.astype(numpy.uint32)",
        }),
    }
}

/// Divides x by the `scale` metadata, which must be a finite positive number that leaves every
/// value finite.
fn apply_scale(x: &mut [f32], d: usize, text: &str, what: &str) -> Result<(), DataError> {
    let bad = |reason: String| DataError::Scale { what: what.into(), value: text.into(), reason };
    let scale: f32 = text.trim().parse().map_err(|_| bad("is not a number".into()))?;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(bad("is not a finite positive number".into()));
    }
    for (i, v) in x.iter_mut().enumerate() {
        let scaled = *v / scale;
        if !scaled.is_finite() {
            return Err(bad(format!("turns x of sample {}, feature {} ({v}) into {scaled}", i / d, i % d)));
        }
        *v = scaled;
    }
    Ok(())
}

/// Checks the labels and returns the number of classes (the largest label + 1).
fn check_labels(y: &[u32], what: &str) -> Result<usize, DataError> {
    if let Some(sample) = y.iter().position(|&l| l as usize >= MAX_CLASSES) {
        return Err(DataError::LabelTooLarge { what: what.into(), sample, label: y[sample] });
    }
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for &label in y {
        *counts.entry(label).or_default() += 1;
    }
    if counts.len() == 1 {
        return Err(DataError::OneClass { what: what.into(), label: y[0] });
    }
    let classes = y.iter().max().map_or(0, |&m| m as usize + 1);
    for class in 0..classes as u32 {
        let count = counts.get(&class).copied().unwrap_or(0);
        if count < MIN_PER_CLASS {
            return Err(DataError::ClassTooSmall {
                what: what.into(),
                class,
                count,
                classes,
                last: classes - 1,
            });
        }
    }
    Ok(classes)
}

#[cfg(test)]
mod tests;
