//! Python objects to JSON values and back: dicts, lists, strings, numbers,
//! booleans and `None`, nothing lost (key order kept, big integers refused
//! rather than rounded).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// The JSON value of `obj`; `path` names it in errors (`messages[3].content`).
pub fn to_value(obj: &Bound<'_, PyAny>, path: &mut String) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            return Ok(Value::from(v));
        }
        if let Ok(v) = i.extract::<u64>() {
            return Ok(Value::from(v));
        }
        return Err(PyValueError::new_err(format!(
            "{path}: integer {i} does not fit in 64 bits"
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let v = f.value();
        return Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{path}: {v} is not a JSON number")));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err(format!("{path}: a key is not a string: {k}")))?;
            let key = key.to_str()?.to_owned();
            let len = path.len();
            path.push('.');
            path.push_str(&key);
            let value = to_value(&v, path)?;
            path.truncate(len);
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return sequence(l.iter(), l.len(), path);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return sequence(t.iter(), t.len(), path);
    }
    let kind = obj.get_type().name()?;
    Err(PyTypeError::new_err(format!(
        "{path}: {kind} is not JSON (a dict, list, str, int, float, bool or None)"
    )))
}

fn sequence<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    len: usize,
    path: &mut String,
) -> PyResult<Value> {
    let mut out = Vec::with_capacity(len);
    for (i, item) in items.enumerate() {
        let at = path.len();
        path.push_str(&format!("[{i}]"));
        out.push(to_value(&item, path)?);
        path.truncate(at);
    }
    Ok(Value::Array(out))
}

/// The Python object for `value`.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, None, Some(f)) => PyFloat::new(py, f).into_any(),
            _ => py.None().into_bound(py),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}
