/* The flat-sequence runtime's list reader, outside Python.
 *
 * ``read`` walks one batch's columns as ``xcep.xseq.sequence.ListReader.read`` does
 * for lists whose fields are all attributes: the opens down to the list's depth (their
 * closes too when an element is stepped at its close), the path's names checked
 * level by level, and for each list element its fields' values read from the
 * attributes after its open, each paired with its number (a cache of numbers, and on a
 * miss ``values.to_number``'s reading, in C for a str); it calls ``take(key, element)`` and ``mark(what)`` as the
 * Python reader does, which stays as the reference (the property tests run both).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };
enum { WILDCARD = -1 }; /* a path step for any name (a name the batch lacks: -2) */
#define NUMBERS_LIMIT 4096 /* numbers cached (then started afresh), as ListReader.pair */

typedef struct {
    PyObject *numbers, *to_number;
} Pairs;

/* values.to_number of a str: float(value) when finite and without '_' (Python's float
 * reads '1_000'), else None; a new reference, NULL on an error other than not a number */
static PyObject *string_number(PyObject *value)
{
    PyObject *number = PyFloat_FromString(value);
    if (number == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t underscore = PyUnicode_FindChar(value, '_', 0, PyUnicode_GET_LENGTH(value), 1);
    if (underscore == -2) {
        Py_DECREF(number);
        return NULL;
    }
    if (underscore >= 0 || !isfinite(PyFloat_AS_DOUBLE(number))) {
        Py_DECREF(number);
        Py_RETURN_NONE;
    }
    return number;
}

/* (value, number of value): the number from the cache, or to_number(value) */
static PyObject *pair(Pairs *p, PyObject *value)
{
    PyObject *number = PyDict_GetItemWithError(p->numbers, value);
    if (number != NULL) {
        Py_INCREF(number);
    } else {
        if (PyErr_Occurred())
            return NULL;
        if (PyDict_GET_SIZE(p->numbers) > NUMBERS_LIMIT)
            PyDict_Clear(p->numbers);
        number = PyUnicode_CheckExact(value) ? string_number(value)
                                              : PyObject_CallOneArg(p->to_number, value);
        if (number == NULL || PyDict_SetItem(p->numbers, value, number) < 0) {
            Py_XDECREF(number);
            return NULL;
        }
    }
    PyObject *out = PyTuple_Pack(2, value, number);
    Py_DECREF(number);
    return out;
}

static int call(PyObject *function, PyObject *a, PyObject *b)
{
    PyObject *r = b != NULL ? PyObject_CallFunctionObjArgs(function, a, b, NULL)
                            : PyObject_CallOneArg(function, a);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The element of the open at i: [doc, node, name, fields, raw attributes or None, None,
 * []], and its partition key (a new reference, or NULL with no error: none). */
static PyObject *element_at(Py_ssize_t i, Py_ssize_t n, const unsigned char *kind,
                            const int32_t *name, const int64_t *node, PyObject *values,
                            PyObject *table, PyObject *doc, long key_id, PyObject *wanted,
                            Py_ssize_t width, int keep_raw, Pairs *p, PyObject **key)
{
    PyObject *fields = PyList_New(width), *raw = keep_raw ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *element = NULL;
    *key = NULL;
    if (fields == NULL || raw == NULL)
        goto out;
    for (Py_ssize_t k = 0; k < width; k++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(fields, k, Py_None);
    }
    for (Py_ssize_t j = i + 1; j < n && kind[j] == ATTR; j++) {
        PyObject *value = PyList_GET_ITEM(values, j);
        if (name[j] == key_id && *key == NULL) {
            Py_INCREF(value);
            *key = value;
        }
        PyObject *id = PyLong_FromLong(name[j]);
        if (id == NULL)
            goto out;
        PyObject *at = PyDict_GetItemWithError(wanted, id);
        Py_DECREF(id);
        if (at == NULL && PyErr_Occurred())
            goto out;
        if (at != NULL) {
            Py_ssize_t slot = PyLong_AsSsize_t(at);
            if (slot < 0 || slot >= width) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "read: a field's slot out of range");
                goto out;
            }
            PyObject *found = pair(p, value);
            if (found == NULL)
                goto out;
            PyList_SetItem(fields, slot, found); /* steals; drops the None */
        }
        if (keep_raw) {
            if (name[j] < 0 || name[j] >= PyList_GET_SIZE(table)) {
                PyErr_SetString(PyExc_ValueError, "read: a name id outside the table");
                goto out;
            }
            PyObject *ident = PyLong_FromLongLong(node[j]);
            PyObject *item =
                ident ? PyTuple_Pack(3, PyList_GET_ITEM(table, name[j]), value, ident) : NULL;
            Py_XDECREF(ident);
            if (item == NULL || PyList_Append(raw, item) < 0) {
                Py_XDECREF(item);
                goto out;
            }
            Py_DECREF(item);
        }
    }
    if (name[i] < 0 || name[i] >= PyList_GET_SIZE(table)) {
        PyErr_SetString(PyExc_ValueError, "read: a name id outside the table");
        goto out;
    }
    PyObject *children = PyList_New(0);
    PyObject *ident = PyLong_FromLongLong(node[i]);
    if (children != NULL && ident != NULL)
        element = PyList_New(7);
    if (element != NULL) {
        PyObject *tag = PyList_GET_ITEM(table, name[i]);
        Py_INCREF(doc);
        Py_INCREF(tag);
        Py_INCREF(fields);
        Py_INCREF(raw);
        Py_INCREF(Py_None);
        PyList_SET_ITEM(element, 0, doc);
        PyList_SET_ITEM(element, 1, ident);
        PyList_SET_ITEM(element, 2, tag);
        PyList_SET_ITEM(element, 3, fields);
        PyList_SET_ITEM(element, 4, raw);
        PyList_SET_ITEM(element, 5, Py_None);
        PyList_SET_ITEM(element, 6, children);
        ident = children = NULL; /* stolen */
    }
    Py_XDECREF(children);
    Py_XDECREF(ident);
out:
    Py_XDECREF(fields);
    Py_XDECREF(raw);
    if (element == NULL)
        Py_CLEAR(*key);
    return element;
}

static PyObject *read_list(PyObject *module, PyObject *args)
{
    Py_buffer kinds, depths, names, docs, nodes;
    PyObject *values, *table, *path, *wanted, *ok, *pending, *pending_key, *doc_now, *take,
        *mark, *opens_marker, *ends_marker;
    long key_id;
    Py_ssize_t width;
    int keep_raw, at_close, partitioned;
    Pairs p;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*O!O!O!lO!npppO!OOOOOOOO!O:read", &kinds, &depths,
                          &names, &docs, &nodes, &PyList_Type, &values, &PyList_Type, &table,
                          &PyTuple_Type, &path, &key_id, &PyDict_Type, &wanted, &width,
                          &keep_raw, &at_close, &partitioned, &PyList_Type, &ok, &pending,
                          &pending_key, &doc_now, &take, &mark, &opens_marker, &ends_marker,
                          &PyDict_Type, &p.numbers, &p.to_number))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = kinds.len, depth_of_list = PyTuple_GET_SIZE(path);
    if (depths.len != 4 * n || names.len != 4 * n || docs.len != 8 * n || nodes.len != 8 * n ||
        PyList_GET_SIZE(values) != n || PyList_GET_SIZE(ok) != depth_of_list + 1 ||
        depth_of_list < 1 || width < 0) {
        PyErr_SetString(PyExc_ValueError, "read: the columns of one batch, ok per depth");
        goto done;
    }
    long *want = PyMem_Malloc(depth_of_list * sizeof *want);
    if (want == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t d = 0; d < depth_of_list; d++) {
        want[d] = PyLong_AsLong(PyTuple_GET_ITEM(path, d));
        if (want[d] == -1 && PyErr_Occurred())
            goto free_want;
    }
    const unsigned char *kind = kinds.buf;
    const int32_t *depth_at = depths.buf, *name = names.buf;
    const int64_t *doc_at = docs.buf, *node = nodes.buf;
    Py_INCREF(pending);
    Py_INCREF(pending_key);
    Py_INCREF(doc_now);
    int has_doc = doc_now != Py_None;
    long long doc = has_doc ? PyLong_AsLongLong(doc_now) : 0;
    if (has_doc && doc == -1 && PyErr_Occurred())
        goto cursor;
    for (Py_ssize_t i = 0; i < n; i++) {
        int k = kind[i];
        Py_ssize_t depth = depth_at[i];
        if (depth > depth_of_list || !(k == OPEN || (at_close && k == CLOSE)))
            continue;
        if (!has_doc || doc_at[i] != doc) { /* a new document (the last may have been cut) */
            if (!partitioned && call(mark, ends_marker, NULL) < 0)
                goto cursor;
            PyObject *number = PyLong_FromLongLong(doc_at[i]);
            if (number == NULL)
                goto cursor;
            Py_SETREF(doc_now, number);
            doc = doc_at[i];
            has_doc = 1;
            Py_SETREF(pending, Py_NewRef(Py_None));
        }
        if (k == CLOSE) {
            if (depth == depth_of_list) {
                if (pending != Py_None) {
                    PyObject *element = pending, *key = pending_key;
                    pending = Py_NewRef(Py_None);
                    pending_key = Py_NewRef(Py_None);
                    int r = call(take, key, element);
                    Py_DECREF(element);
                    Py_DECREF(key);
                    if (r < 0)
                        goto cursor;
                }
            } else if (depth == depth_of_list - 1 && !partitioned) {
                if (call(mark, ends_marker, NULL) < 0) /* the parent's list is over */
                    goto cursor;
            }
            continue;
        }
        if (depth < 1) {
            PyErr_SetString(PyExc_ValueError, "read: an open at depth 0");
            goto cursor;
        }
        long step = want[depth - 1];
        int on = PyList_GET_ITEM(ok, depth - 1) == Py_True && (step == WILDCARD || step == name[i]);
        PyList_SetItem(ok, depth, Py_NewRef(on ? Py_True : Py_False));
        if (depth < depth_of_list) {
            if (depth == depth_of_list - 1 && !partitioned && on &&
                call(mark, opens_marker, NULL) < 0)
                goto cursor;
            continue;
        }
        if (!on)
            continue;
        PyObject *key;
        PyObject *element = element_at(i, n, kind, name, node, values, table, doc_now, key_id,
                                       wanted, width, keep_raw, &p, &key);
        if (element == NULL)
            goto cursor;
        if (partitioned && key == NULL) { /* in no partition */
            Py_DECREF(element);
            continue;
        }
        if (key == NULL)
            key = Py_NewRef(Py_None);
        if (at_close) { /* stepped at its close, as the automaton emits then */
            Py_SETREF(pending, element);
            Py_SETREF(pending_key, key);
            continue;
        }
        int r = call(take, key, element);
        Py_DECREF(element);
        Py_DECREF(key);
        if (r < 0)
            goto cursor;
    }
    result = PyTuple_Pack(3, pending, pending_key, doc_now);
cursor:
    Py_DECREF(pending);
    Py_DECREF(pending_key);
    Py_DECREF(doc_now);
free_want:
    PyMem_Free(want);
done:
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&depths);
    PyBuffer_Release(&names);
    PyBuffer_Release(&docs);
    PyBuffer_Release(&nodes);
    return result;
}

static PyMethodDef methods[] = {
    {"read", read_list, METH_VARARGS,
     "read(kinds, depths, names, docs, nodes, values, name table, path ids, key id, wanted, "
     "width, keep_raw, at_close, partitioned, ok, pending, pending key, doc, take, mark, "
     "parent-opens marker, list-ends marker, numbers, to_number) -> (pending, pending key, "
     "doc)\n\nListReader.read for lists whose fields are attributes: see "
     "xcep/xseq/sequence.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lists", "The flat-sequence runtime's list reader.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lists(void)
{
    return PyModule_Create(&module);
}
