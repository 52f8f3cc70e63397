/* Whether a frame is in the codec's canonical CBOR, by one pass over its item headers, in C.

   Why. overlay.codec accepts a frame only if it is byte for byte what cbor2.dumps makes of
   what cbor2.loads made of it (one encoding per message). Encoding again to compare costs
   about as much as decoding: a quarter of decoding a run of 60 packets, more than half of
   decoding a small message. Walking the headers costs a few nanoseconds an item, and skips
   the payloads.

   The rule that keeps it safe: it only ever accepts. is_canonical(frame) is True only for
   a frame that is exactly one CBOR data item made of the forms below, each written as
   cbor2 writes the value it reads (so encoding again would give the frame back); for any
   other frame it is False, and the codec encodes again and compares, which decides and
   names the fault. The forms:

   - unsigned and negative integers (major types 0 and 1), the argument in the fewest bytes;
   - byte strings (2) of definite length, the length in the fewest bytes;
   - arrays (4) of definite length, the length in the fewest bytes, at most MAX_DEPTH deep;
   - false, true and null (0xf4, 0xf5, 0xf6);
   - finite double-precision floats (0xfb: cbor2 writes NaN and the infinities shorter).

   Text strings, maps, tags, half and single floats, other simple values, reserved or
   indefinite lengths: False (no message holds them; the codec's own path refuses them). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Deeper than any message nests (a bundle of runs is four levels); a frame nested deeper
   takes the codec's own path. */
#define MAX_DEPTH 32

/* The argument of an item whose additional information is ``ai``, read from ``p`` (``*pos``
   just past the initial byte), if it is in the fewest bytes; -1 if it is not, is not a
   length CBOR defines, or runs past ``n``. */
static int
read_argument(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, int ai, uint64_t *arg)
{
    Py_ssize_t at = *pos;
    uint64_t value = 0;
    int size;
    uint64_t least;
    if (ai < 24) {
        *arg = (uint64_t)ai;
        return 0;
    }
    switch (ai) {
    case 24: size = 1; least = 24; break;
    case 25: size = 2; least = 0x100; break;
    case 26: size = 4; least = 0x10000; break;
    case 27: size = 8; least = 0x100000000ULL; break;
    default: return -1; /* 28 to 30 are reserved, 31 is an indefinite length */
    }
    if (n - at < size) {
        return -1;
    }
    for (int i = 0; i < size; i++) {
        value = (value << 8) | p[at + i];
    }
    if (value < least) {
        return -1; /* it fits in fewer bytes */
    }
    *pos = at + size;
    *arg = value;
    return 0;
}

/* 1 if ``p[0..n)`` is one item of the forms above and nothing after it, else 0. */
static int
canonical(const unsigned char *p, Py_ssize_t n)
{
    uint64_t left[MAX_DEPTH + 1]; /* items still to read at each open level */
    int depth = 0;
    Py_ssize_t pos = 0;
    left[0] = 1;
    while (depth >= 0) {
        if (left[depth] == 0) {
            depth--;
            continue;
        }
        left[depth]--;
        if (pos >= n) {
            return 0;
        }
        unsigned char initial = p[pos++];
        int major = initial >> 5;
        uint64_t arg;
        if (major == 7) {
            if (initial == 0xf4 || initial == 0xf5 || initial == 0xf6) {
                continue;
            }
            if (initial != 0xfb || n - pos < 8) {
                return 0;
            }
            /* An exponent of all ones is an infinity or a NaN. */
            if ((p[pos] & 0x7f) == 0x7f && (p[pos + 1] & 0xf0) == 0xf0) {
                return 0;
            }
            pos += 8;
            continue;
        }
        if (major == 3 || major == 5 || major == 6) {
            return 0;
        }
        if (read_argument(p, n, &pos, initial & 0x1f, &arg) < 0) {
            return 0;
        }
        if (major == 2) {
            if (arg > (uint64_t)(n - pos)) {
                return 0;
            }
            pos += (Py_ssize_t)arg;
        }
        else if (major == 4 && arg > 0) {
            if (depth == MAX_DEPTH) {
                return 0;
            }
            left[++depth] = arg;
        }
    }
    return pos == n;
}

static PyObject *
is_canonical(PyObject *module, PyObject *frame)
{
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    int yes = canonical((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyBool_FromLong(yes);
}

static PyMethodDef canonical_methods[] = {
    {"is_canonical", (PyCFunction)is_canonical, METH_O,
     "is_canonical(frame): True if frame is one CBOR item of the forms the codec's messages\n"
     "use, each as cbor2 writes it; False otherwise (not canonical, or not known here)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef canonical_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "overlay._canonical",
    .m_doc = "Whether a frame is in the codec's canonical CBOR.",
    .m_size = -1,
    .m_methods = canonical_methods,
};

PyMODINIT_FUNC
PyInit__canonical(void)
{
    return PyModule_Create(&canonical_module);
}
