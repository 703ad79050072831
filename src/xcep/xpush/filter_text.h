/* What the compiled core's readers of filter text share (_states.c: filter_shape;
 * plan_reader.c: read_plan): the character classes of the filter tokenizer (parser.py's
 * TOKEN_PATTERN, workload.py's PIECE_PATTERN) as Python's re reads them on str. */
#ifndef XCEP_XPUSH_FILTER_TEXT_H
#define XCEP_XPUSH_FILTER_TEXT_H

#include <Python.h>

/* [\w.\-\u00b7\u00c0-\uffff]: a character of a name */
static inline int shape_name_char(Py_UCS4 c)
{
    if (c < 128) /* ASCII: no table lookup */
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
    return Py_UNICODE_ISALNUM(c) || c == 0xB7 || (c >= 0xC0 && c <= 0xFFFF);
}

static inline int shape_digit(Py_UCS4 c) /* \d */
{
    return c < 128 ? c >= '0' && c <= '9' : Py_UNICODE_ISDECIMAL(c);
}

/* [A-Za-z_\u00c0-\uffff]: the first character of a name */
static inline int shape_name_start(Py_UCS4 c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (c >= 0xC0 && c <= 0xFFFF);
}

/* read_plan(text) -> (head, atoms, formula) or None (plan_reader.c) */
PyObject *read_plan(PyObject *module, PyObject *text);
/* filter_tokens(text, token) -> a filter's tokens or None (plan_reader.c) */
PyObject *filter_tokens(PyObject *module, PyObject *args);

#endif
