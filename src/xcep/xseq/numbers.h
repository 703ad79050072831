/* What the XSeq kernels (_vm.c, _lists.c) share of values.to_number. */
#ifndef XCEP_XSEQ_NUMBERS_H
#define XCEP_XSEQ_NUMBERS_H

#include <Python.h>

/* Whether a str plainly reads as no number, so that float() need not be asked (its refusal
 * builds an exception: most of the cost of comparing a text with a string): an ASCII text
 * with '_' or a letter other than e/E (float() reads only inf, infinity and nan with other
 * letters, which values.to_number refuses as not finite). */
static inline int plainly_not_a_number(PyObject *text)
{
    if (!PyUnicode_IS_ASCII(text))
        return 0;
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(text);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(text); i < n; i++) {
        Py_UCS1 c = s[i] | 32; /* (a letter in lower case) */
        if (s[i] == '_' || (c >= 'a' && c <= 'z' && c != 'e'))
            return 1;
    }
    return 0;
}

#endif
