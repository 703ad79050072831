/* The compiled table walk of the XPush machine (machine.py, XPushMachine.run).
 *
 * walk() follows the machine's transition tables over the events of one
 * document for as long as every entry it needs is there, exactly as the
 * Python loop does, and stops *before* the first event it cannot finish: a
 * missing entry (the Python code builds it, lazily, like a lazy DFA's slow
 * path), the close of the root (the Python code answers the document), or
 * another document. It never changes anything for an event it does not finish.
 * With element values (filters comparing an element's string value) it keeps
 * the text parts of each open element as the Python loop does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { OPEN = 0, ATTR = 1, TEXT = 2, CLOSE = 3 };

/* table[(a, b)] or NULL (borrowed) with no exception; NULL with one on failure. */
static PyObject *get2(PyObject *table, PyObject *a, PyObject *b)
{
    PyObject *key = PyTuple_Pack(2, a, b);
    if (key == NULL)
        return NULL;
    PyObject *value = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    return value;
}

/* An entry (popped, notes) of the leaf or close table, checked. */
static int unpack(PyObject *entry, PyObject **popped, PyObject **notes)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "a table entry must be (popped, notes)");
        return -1;
    }
    *popped = PyTuple_GET_ITEM(entry, 0);
    *notes = PyTuple_GET_ITEM(entry, 1);
    return 0;
}

/* The value states of an element's string value: values[qt] is False (no
 * filter compares this element's value), or a dict text -> states. */
static PyObject *value_states(PyObject *table, PyObject *qt, PyObject *text, PyObject *empty)
{
    PyObject *by_text = PyDict_GetItemWithError(table, qt);
    if (by_text == NULL)
        return NULL;
    if (by_text == Py_False)
        return empty;
    if (!PyDict_Check(by_text))
        return NULL;
    return PyDict_GetItemWithError(by_text, text);
}

static PyObject *walk(PyObject *module, PyObject *args)
{
    Py_buffer docs, kinds, names;
    PyObject *values, *elem_labels, *attr_labels, *text_label, *push, *leaf, *close, *add;
    PyObject *element_values, *texts, *empty, *stack, *proven, *qt, *qb;
    long long doc;
    Py_ssize_t i, n;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*y*O!LnnO!O!UO!O!O!O!OOOO!O!OO:walk", &docs, &kinds, &names,
                          &PyList_Type, &values, &doc, &i, &n, &PyList_Type, &elem_labels,
                          &PyList_Type, &attr_labels, &text_label, &PyDict_Type, &push,
                          &PyDict_Type, &leaf, &PyDict_Type, &close, &PyDict_Type, &add,
                          &element_values, &texts, &empty, &PyList_Type, &stack, &PyList_Type,
                          &proven, &qt, &qb))
        return NULL;
    /* element values: texts is the list of text parts of each open element, and
     * element_values the values table; both None when no filter compares one */
    int with_values = texts != Py_None;
    if (with_values && (!PyList_Check(texts) || !PyDict_Check(element_values))) {
        PyErr_SetString(PyExc_TypeError, "texts must be a list and values a dict");
        PyBuffer_Release(&docs);
        PyBuffer_Release(&kinds);
        PyBuffer_Release(&names);
        return NULL;
    }
    PyObject *result = NULL;
    const long long *doc_of = docs.buf;
    const unsigned char *kind_of = kinds.buf;
    const int *name_of = names.buf;
    Py_ssize_t count = kinds.len;
    if (docs.itemsize != 8 || names.itemsize != 4 || docs.len / 8 != count ||
        names.len / 4 != count || PyList_GET_SIZE(values) != count || i < 0 || n > count) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths or types");
        goto out;
    }
    Py_INCREF(qt);
    Py_INCREF(qb);
    for (; i < n; i++) {
        if (doc_of[i] != doc)
            break;
        int kind = kind_of[i];
        int name = name_of[i];
        if (kind == OPEN) {
            if (name < 0 || name >= PyList_GET_SIZE(elem_labels))
                break;
            PyObject *child = get2(push, qt, PyList_GET_ITEM(elem_labels, name));
            if (child == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            PyObject *frame = PyTuple_Pack(2, qt, qb);
            if (frame == NULL || PyList_Append(stack, frame) < 0) {
                Py_XDECREF(frame);
                goto fail;
            }
            Py_DECREF(frame);
            if (with_values) {
                PyObject *parts = PyList_New(0);
                if (parts == NULL || PyList_Append(texts, parts) < 0) {
                    Py_XDECREF(parts);
                    goto fail;
                }
                Py_DECREF(parts);
            }
            Py_INCREF(child);
            Py_SETREF(qt, child);
            Py_INCREF(empty);
            Py_SETREF(qb, empty);
        } else if (kind == CLOSE) {
            Py_ssize_t depth = PyList_GET_SIZE(stack);
            if (depth < 2 || name < 0 || name >= PyList_GET_SIZE(elem_labels))
                break; /* the root closes: the Python code answers the document */
            PyObject *frame = PyList_GET_ITEM(stack, depth - 1);
            PyObject *parent_qt = PyTuple_GET_ITEM(frame, 0), *parent_qb = PyTuple_GET_ITEM(frame, 1);
            PyObject *vq = empty, *text = NULL;
            if (with_values) {
                Py_ssize_t open = PyList_GET_SIZE(texts);
                if (open < 2)
                    break;
                PyObject *separator = PyUnicode_FromStringAndSize("", 0);
                text = separator == NULL ? NULL
                                         : PyUnicode_Join(separator, PyList_GET_ITEM(texts, open - 1));
                Py_XDECREF(separator);
                if (text == NULL)
                    goto fail;
                vq = value_states(element_values, qt, text, empty);
                if (vq == NULL) {
                    Py_DECREF(text);
                    if (PyErr_Occurred())
                        goto fail;
                    break;
                }
            }
            PyObject *key = PyTuple_Pack(4, parent_qt, qb, vq, PyList_GET_ITEM(elem_labels, name));
            PyObject *entry = key == NULL ? NULL : PyDict_GetItemWithError(close, key);
            Py_XDECREF(key);
            if (entry == NULL) {
                Py_XDECREF(text);
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            PyObject *popped, *notes, *sum = NULL;
            if (unpack(entry, &popped, &notes) == 0)
                sum = get2(add, parent_qb, popped);
            if (sum == NULL) {
                Py_XDECREF(text);
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            if (with_values) { /* the element's value joins its parent's */
                Py_ssize_t open = PyList_GET_SIZE(texts);
                int r = PyList_Append(PyList_GET_ITEM(texts, open - 2), text);
                Py_DECREF(text);
                if (r < 0 || PyList_SetSlice(texts, open - 1, open, NULL) < 0)
                    goto fail;
            }
            int proves = PyObject_IsTrue(notes);
            if (proves < 0 || (proves && PyList_Append(proven, notes) < 0))
                goto fail;
            Py_INCREF(parent_qt);
            Py_SETREF(qt, parent_qt);
            Py_INCREF(sum);
            Py_SETREF(qb, sum);
            if (PyList_SetSlice(stack, depth - 1, depth, NULL) < 0)
                goto fail;
        } else {
            PyObject *label;
            if (kind == ATTR) {
                if (name < 0 || name >= PyList_GET_SIZE(attr_labels))
                    break;
                label = PyList_GET_ITEM(attr_labels, name);
            } else
                label = text_label;
            PyObject *entry = get2(leaf, qt, label);
            if (entry == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            if (PyDict_Check(entry)) { /* the entry depends on the value */
                PyObject *value = PyList_GET_ITEM(values, i);
                entry = value == Py_None ? NULL : PyDict_GetItemWithError(entry, value);
                if (entry == NULL) {
                    if (PyErr_Occurred())
                        goto fail;
                    break;
                }
            }
            PyObject *popped, *notes;
            if (unpack(entry, &popped, &notes) < 0)
                goto fail;
            PyObject *sum = get2(add, qb, popped);
            if (sum == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            if (with_values && kind == TEXT) {
                Py_ssize_t open = PyList_GET_SIZE(texts);
                if (open < 1 || PyList_Append(PyList_GET_ITEM(texts, open - 1),
                                              PyList_GET_ITEM(values, i)) < 0)
                    goto fail;
            }
            int proves = PyObject_IsTrue(notes);
            if (proves < 0 || (proves && PyList_Append(proven, notes) < 0))
                goto fail;
            Py_INCREF(sum);
            Py_SETREF(qb, sum);
        }
    }
    result = Py_BuildValue("nOO", i, qt, qb);
fail:
    Py_DECREF(qt);
    Py_DECREF(qb);
out:
    PyBuffer_Release(&docs);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&names);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(docs, kinds, names, values, doc, i, n, elem_labels, attr_labels, text_label, push, "
     "leaf, close, add, element_values, texts, empty, stack, proven, qt, qb) -> (i, qt, qb)\n\n"
     "Follow the tables over events i..n-1 of document doc; stop before the first event "
     "that needs a missing entry, closes the root, or belongs to another document."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_walk", "The compiled table walk of the XPush machine.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void)
{
    return PyModule_Create(&module);
}
