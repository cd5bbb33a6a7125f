//! A Python `str`'s UTF-8, borrowed rather than copied, and a plain
//! history's strings read without reference counting: the only unsafe
//! code of the bindings.
//!
//! Under the stable ABI for CPython 3.9, PyO3 reads a `str` through a new
//! `bytes` object (`PyUnicode_AsUTF8String`) and copies it out: an allocation
//! and two copies per string. `PyUnicode_AsUTF8AndSize` gives the string's
//! own UTF-8 buffer (an ASCII string's data as it is, a cached encoding
//! otherwise, kept as long as the string lives). It is in the limited API
//! from 3.10 and exported by every CPython since 3.3, so it is declared here
//! for the 3.9 builds too.

#![allow(unsafe_code)]

use std::os::raw::c_char;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

unsafe extern "C" {
    fn PyUnicode_AsUTF8AndSize(unicode: *mut ffi::PyObject, size: *mut ffi::Py_ssize_t) -> *const c_char;
}

/// The UTF-8 of `s`, borrowed for as long as `s` is (a strong reference
/// keeps the string, and so its buffer, alive; a `str` never changes).
///
/// # Errors
///
/// `UnicodeEncodeError` for a string that is not valid Unicode (a lone
/// surrogate), as `str.encode()` raises.
pub fn str_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a live `str` (the GIL is held: `Bound`); the call
    // returns its UTF-8 buffer, valid while `s` lives, or NULL with an
    // exception set.
    let data = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
    if data.is_null() {
        return Err(PyErr::fetch(s.py()));
    }
    let len = usize::try_from(size).unwrap_or(0);
    // SAFETY: CPython guarantees `len` bytes of valid UTF-8 at `data`,
    // owned by `s`, which outlives the borrow.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    // SAFETY: CPython's encoder produced it: valid UTF-8 (checked in debug builds).
    debug_assert!(std::str::from_utf8(bytes).is_ok());
    Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// A plain message of the caller's: its role and content strings, borrowed
/// from its dict without a reference count (see [`plain_items`]).
#[derive(Clone, Copy, Debug)]
pub struct Plain<'a> {
    role: *mut ffi::PyObject,
    content: &'a str,
}

impl<'a> Plain<'a> {
    /// Whether the role is the string object `s` (an interned string).
    pub fn role_is(&self, s: &Bound<'_, PyString>) -> bool {
        self.role == s.as_ptr()
    }

    /// The role's UTF-8.
    pub fn role_text(&self, py: Python<'_>) -> PyResult<&'a str> {
        // SAFETY: `plain_items`' contract keeps the string alive for 'a.
        unsafe { text(py, self.role) }
    }

    /// The content's UTF-8.
    pub fn content(&self) -> &'a str {
        self.content
    }
}

/// The UTF-8 of the `str` at `s`, borrowed.
///
/// # Safety
///
/// `s` is a live `str` that outlives `'a`, and the GIL is held.
unsafe fn text<'a>(py: Python<'_>, s: *mut ffi::PyObject) -> PyResult<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: the caller's contract.
    let data = unsafe { PyUnicode_AsUTF8AndSize(s, &mut size) };
    if data.is_null() {
        return Err(PyErr::fetch(py));
    }
    let len = usize::try_from(size).unwrap_or(0);
    // SAFETY: `len` bytes of valid UTF-8 owned by `s`, which outlives 'a.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    debug_assert!(std::str::from_utf8(bytes).is_ok());
    // SAFETY: CPython's UTF-8 encoding of a `str` is valid UTF-8.
    Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// The items of `list` when every one is a plain message (a `dict` of
/// exactly the keys `role` and `content`, both `str`, exact types), read
/// without touching reference counts; `None` otherwise.
///
/// # Safety
///
/// The items are borrowed from the list and its dicts: the caller keeps the
/// GIL and runs no Python code (nothing that could change the list or its
/// dicts, or free an object) while it uses them.
///
/// # Errors
///
/// The exception a key lookup raised.
pub unsafe fn plain_items<'a>(
    list: &'a Bound<'_, PyList>,
    role_key: &Bound<'_, PyString>,
    content_key: &Bound<'_, PyString>,
) -> PyResult<Option<Vec<Plain<'a>>>> {
    let py = list.py();
    let n = list.len();
    let mut out = Vec::with_capacity(n);
    // SAFETY: the GIL is held (`Bound`); every pointer read is checked
    // (type, NULL) before it is used; borrowed references are not kept past
    // the caller's contract.
    unsafe {
        let dict_type = &raw mut ffi::PyDict_Type;
        let str_type = &raw mut ffi::PyUnicode_Type;
        for i in 0..n {
            let Ok(index) = ffi::Py_ssize_t::try_from(i) else {
                return Ok(None);
            };
            let item = ffi::PyList_GetItem(list.as_ptr(), index);
            if item.is_null() {
                return Err(PyErr::fetch(py));
            }
            if ffi::Py_TYPE(item) != dict_type || ffi::PyDict_Size(item) != 2 {
                return Ok(None);
            }
            // The two entries in the dict's order; their keys compared as
            // objects (interned keys, the usual case), else looked up.
            let (mut pos, mut k1, mut v1, mut k2, mut v2): (ffi::Py_ssize_t, _, _, _, _) = (
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            let both = ffi::PyDict_Next(item, &mut pos, &mut k1, &mut v1) != 0
                && ffi::PyDict_Next(item, &mut pos, &mut k2, &mut v2) != 0;
            let (r, c) = (role_key.as_ptr(), content_key.as_ptr());
            let (role, content) = match both {
                true if k1 == r && k2 == c => (v1, v2),
                true if k1 == c && k2 == r => (v2, v1),
                _ => (
                    ffi::PyDict_GetItemWithError(item, r),
                    ffi::PyDict_GetItemWithError(item, c),
                ),
            };
            if role.is_null() || content.is_null() {
                return match PyErr::take(py) {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
            if ffi::Py_TYPE(role) != str_type || ffi::Py_TYPE(content) != str_type {
                return Ok(None);
            }
            out.push(Plain {
                role,
                content: text(py, content)?,
            });
        }
    }
    Ok(Some(out))
}
