//! The built-in digits, the split's promises, and one test per [`DataError`] message.

use std::collections::HashMap;
use std::path::PathBuf;

use safetensors::tensor::{Dtype, TensorView};

use super::*;

#[test]
fn digits_load_as_documented() {
    let digits = Dataset::digits();
    assert_eq!((digits.n, digits.d, digits.classes), (1797, 64, 10));
    assert_eq!((digits.x.len(), digits.y.len()), (1797 * 64, 1797));
    let counts = digits.class_counts();
    assert!(counts.iter().all(|c| (174..=183).contains(c)), "{counts:?}");
    assert_eq!(counts.iter().sum::<usize>(), 1797);
    // Pixel counts k/16: in [0, 1], exact, and both ends used.
    assert!(digits.x.iter().all(|&v| (0.0..=1.0).contains(&v) && (v * 16.0).fract() == 0.0));
    assert!(digits.x.contains(&0.0) && digits.x.contains(&1.0));
    assert_eq!(digits.sample(1).len(), 64);
    assert_eq!(digits.label(0), 0, "sklearn's first digit is a 0");
    assert_eq!(digits.describe(), "digits: 1797 samples × 64 features, 10 classes");
}

#[test]
fn the_split_is_stratified_disjoint_complete_and_seeded() {
    let digits = Dataset::digits();
    let split = digits.split(0.2, 1);
    let counts = digits.class_counts();
    for (class, &count) in counts.iter().enumerate() {
        let in_test = split.test.iter().filter(|&&i| digits.label(i) == class as u32).count();
        let share = count as f64 * 0.2;
        assert!((in_test as f64 - share).abs() <= 1.0, "class {class}: {in_test} of {count} in test");
    }
    assert!(split.train.windows(2).all(|w| w[0] < w[1]) && split.test.windows(2).all(|w| w[0] < w[1]));
    let mut all: Vec<usize> = split.train.iter().chain(&split.test).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..digits.n).collect::<Vec<_>>(), "disjoint and covering every sample");

    assert_eq!(digits.split(0.2, 1), split, "same seed, same split");
    assert_ne!(digits.split(0.2, 2).test, split.test, "another seed, another split");
}

#[test]
fn every_class_keeps_a_sample_on_each_side() {
    let digits = Dataset::digits();
    for fraction in [0.0, 0.001, 0.999, 1.0, f64::NAN] {
        let split = digits.split(fraction, 3);
        for class in 0..10 {
            assert!(split.test.iter().any(|&i| digits.label(i) == class), "{fraction}: class {class} test");
            assert!(split.train.iter().any(|&i| digits.label(i) == class), "{fraction}: class {class} train");
        }
    }
}

#[test]
fn the_split_json_is_what_the_baseline_reads() {
    let split = Split { train: vec![0, 2, 3], test: vec![1] };
    assert_eq!(split.to_json(), r#"{"train":[0,2,3],"test":[1]}"#);
}

/// One tensor for a test file: name, dtype, shape, little-endian bytes.
type Spec<'a> = (&'a str, Dtype, Vec<usize>, Vec<u8>);

/// A test's own temp folder, removed when dropped (also when the test fails).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ws-train-data-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a safetensors file with the crate's serializer into its own temp folder: the file
/// is `<folder>/<tag>.safetensors`.
fn write(tag: &str, tensors: Vec<Spec<'_>>, scale: Option<&str>) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let path = dir.0.join(format!("{tag}.safetensors"));
    let views: Vec<(&str, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| (*name, TensorView::new(*dtype, shape.clone(), bytes).unwrap()))
        .collect();
    let metadata = scale.map(|s| HashMap::from([("scale".to_string(), s.to_string())]));
    std::fs::write(&path, safetensors::serialize(views, metadata).unwrap()).unwrap();
    (dir, path)
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// x: 4 samples × 2 features (F32); y: labels 0, 1, 0, 1 (U8).
fn good() -> Vec<Spec<'static>> {
    vec![
        ("x", Dtype::F32, vec![4, 2], f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])),
        ("y", Dtype::U8, vec![4], vec![0, 1, 0, 1]),
    ]
}

/// Loads `tensors` from a file and returns the error's message.
fn message(tag: &str, tensors: Vec<Spec<'_>>, scale: Option<&str>) -> String {
    let (_dir, path) = write(tag, tensors, scale);
    let err = Dataset::load(&path).expect_err("the file should be refused");
    err.to_string()
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for part in parts {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
}

#[test]
fn a_user_file_loads_with_u8_x_u32_y_and_a_scale() {
    let (_dir, path) = write("good", good(), Some("2"));
    let data = Dataset::load(&path).unwrap();
    assert_eq!((data.n, data.d, data.classes, data.name.as_str()), (4, 2, 2, "good"));
    assert_eq!(data.sample(3), &[3.0, 3.5]);

    let (_dir, path) = write(
        "u8",
        vec![
            ("x", Dtype::U8, vec![4, 1], vec![0, 255, 7, 8]),
            ("y", Dtype::U32, vec![4], u32s(&[2, 1, 0, 0])),
            ("extra", Dtype::F32, vec![1], f32s(&[1.0])),
        ],
        None,
    );
    // Two samples of class 1 are needed: this file has one.
    let msg = Dataset::load(&path).unwrap_err().to_string();
    assert_mentions(&msg, &["class 1 has 1 sample(s)", "at least 2", "labels 0 to 2 make 3 classes"]);

    let (_dir2, path) = write(
        "u8-ok",
        vec![
            ("x", Dtype::U8, vec![4, 1], vec![0, 255, 7, 8]),
            ("y", Dtype::U32, vec![4], u32s(&[1, 1, 0, 0])),
        ],
        None,
    );
    let data = Dataset::load(&path).unwrap();
    assert_eq!((data.x.as_slice(), data.y.as_slice()), (&[0.0, 255.0, 7.0, 8.0][..], &[1, 1, 0, 0][..]));
}

#[test]
fn an_unreadable_file_says_so() {
    let err = Dataset::load(Path::new("/nonexistent/ws-train-data.safetensors")).unwrap_err();
    assert!(matches!(err, DataError::Read { .. }));
    assert_mentions(
        &err.to_string(),
        &["could not read /nonexistent/ws-train-data.safetensors", "built-in digits"],
    );
}

#[test]
fn a_file_that_is_not_safetensors_says_how_to_save_one() {
    let (_dir, path) = write("not-safetensors", good(), None);
    std::fs::write(&path, b"x,y\n1,0\n").unwrap();
    let msg = Dataset::load(&path).unwrap_err().to_string();
    assert_mentions(&msg, &["is not a safetensors file", "safetensors.numpy.save_file"]);
}

#[test]
fn a_missing_tensor_names_the_tensors_found() {
    let mut tensors = good();
    tensors[1].0 = "labels";
    let msg = message("missing", tensors, None);
    assert_mentions(&msg, &["has no tensor `y`", "(it has `labels`, `x`)"]);
}

#[test]
fn a_wrong_rank_gives_the_shape_needed() {
    let msg = message("rank-x", vec![("x", Dtype::F32, vec![8], f32s(&[0.0; 8])), good().remove(1)], None);
    assert_mentions(&msg, &["tensor `x` has shape [8]", "2 dimension(s), samples × features"]);
    let msg = message("rank-y", vec![good().remove(0), ("y", Dtype::U8, vec![4, 1], vec![0, 1, 0, 1])], None);
    assert_mentions(&msg, &["tensor `y` has shape [4, 1]", "1 dimension(s), one label per sample"]);
}

#[test]
fn a_wrong_dtype_says_which_are_accepted_and_how_to_convert() {
    let msg = message("dtype-x", vec![("x", Dtype::F64, vec![4, 1], vec![0; 32]), good().remove(1)], None);
    assert_mentions(&msg, &["tensor `x` is F64", "only F32 and U8", "x.astype(numpy.float32)"]);
    let msg = message("dtype-y", vec![good().remove(0), ("y", Dtype::I64, vec![4], vec![0; 32])], None);
    assert_mentions(&msg, &["tensor `y` is I64", "only U8 and U32", "y.astype(numpy.uint32)"]);
}

#[test]
fn x_and_y_must_agree_on_the_sample_count() {
    let msg = message("count", vec![good().remove(0), ("y", Dtype::U8, vec![3], vec![0, 1, 0])], None);
    assert_mentions(&msg, &["`x` has 4 samples but `y` has 3 labels"]);
}

#[test]
fn an_empty_x_is_refused() {
    let msg = message(
        "empty-d",
        vec![("x", Dtype::F32, vec![4, 0], vec![]), ("y", Dtype::U8, vec![4], vec![0, 1, 0, 1])],
        None,
    );
    assert_mentions(&msg, &["shape [4, 0], which holds no data"]);
    let msg = message(
        "empty-n",
        vec![("x", Dtype::F32, vec![0, 3], vec![]), ("y", Dtype::U8, vec![0], vec![])],
        None,
    );
    assert_mentions(&msg, &["shape [0, 3], which holds no data"]);
}

#[test]
fn a_bad_scale_is_refused() {
    for (scale, reason) in [
        ("sixteen", "is not a number"),
        ("0", "is not a finite positive number"),
        ("-2", "is not a finite positive number"),
        ("inf", "is not a finite positive number"),
        ("NaN", "is not a finite positive number"),
        ("1e-40", "turns x of sample 0, feature 1 (1) into inf"),
    ] {
        let msg = message("scale", good(), Some(scale));
        assert_mentions(
            &msg,
            &[&format!("the `scale` metadata \"{scale}\" {reason}"), "finite positive number"],
        );
    }
}

#[test]
fn a_non_finite_x_names_its_sample_and_feature() {
    let mut tensors = good();
    tensors[0].3 = f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, f32::NAN, 6.0, 7.0]);
    let msg = message("nan", tensors, None);
    assert_mentions(&msg, &["sample 2, feature 1 is NaN", "numpy.nan_to_num"]);
}

#[test]
fn one_class_is_not_enough() {
    let msg = message("one-class", vec![good().remove(0), ("y", Dtype::U8, vec![4], vec![3, 3, 3, 3])], None);
    assert_mentions(&msg, &["every label is 3", "at least 2 classes"]);
}

#[test]
fn a_label_too_large_is_refused() {
    let msg = message(
        "large-label",
        vec![good().remove(0), ("y", Dtype::U32, vec![4], u32s(&[0, 1, 70_000, 1]))],
        None,
    );
    assert_mentions(&msg, &["label 70000 of sample 2 is too large", "at most 65536 classes"]);
}

#[test]
fn a_class_without_enough_samples_is_refused() {
    // Labels 0 and 2: class 1 has none.
    let msg = message("gap", vec![good().remove(0), ("y", Dtype::U8, vec![4], vec![0, 2, 0, 2])], None);
    assert_mentions(&msg, &["class 1 has 0 sample(s)", "renumber the labels"]);
}
