/* Instances of a slotted class built by writing their slots, in C.

   Why. A relay or a root builds a message object (or a client event) for every packet it
   handles. Built in Python by its slots (overlay.compiled_checks: object.__new__, then each
   slot descriptor's __set__), a nine-field SubscribeData costs about 0.7 us, most of it the
   nine calls. Here it is one allocation and nine pointer stores.

   What it does, exactly: what object.__new__(cls) and then descriptor.__set__(obj, value)
   for each named slot would do, and nothing else (no __init__, no __post_init__, no check of
   the values). The caller's rules are compiled_checks' rules: every field is given, the
   values were checked where they entered, and cls has no __post_init__.

   What it refuses, when a Builder is made: a name that is not a writable object slot of
   cls (a member descriptor of type T_OBJECT_EX), a class whose instances are not plain
   objects with slots (a custom tp_new or a variable size), more than MAX_FIELDS fields. A
   refused Builder raises TypeError and the caller keeps the pure-Python path. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define MAX_FIELDS 16

typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    Py_ssize_t count;
    Py_ssize_t offsets[MAX_FIELDS];
} Builder;

static PyTypeObject BuilderType;
static PyObject *ONE;  /* the int 1, made once */

/* A new instance of the builder's class, every slot set from values[0..count). The values
   are held before the allocation, which may run a collection and so any __del__: nothing
   the caller passed can go away under us. */
static PyObject *
make_from(Builder *self, PyObject *const *values)
{
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Py_INCREF(values[i]);
    }
    PyObject *obj = self->cls->tp_alloc(self->cls, 0);
    if (obj == NULL) {
        for (Py_ssize_t i = 0; i < self->count; i++) {
            Py_DECREF(values[i]);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->count; i++) {
        *(PyObject **)((char *)obj + self->offsets[i]) = values[i];
    }
    return obj;
}

/* ``row`` as a tuple (a new reference), which nothing can change while we read it; NULL
   with TypeError if it is not a sequence. */
static PyObject *
as_tuple(PyObject *row, const char *what)
{
    if (PyTuple_CheckExact(row)) {
        return Py_NewRef(row);
    }
    if (!PySequence_Check(row)) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence", what);
        return NULL;
    }
    return PySequence_Tuple(row);
}

/* make_from(values), appended to ``built``: 0, or -1 with the error set. */
static int
append_made(Builder *self, PyObject *built, PyObject *const *values)
{
    PyObject *obj = make_from(self, values);
    if (obj == NULL) {
        return -1;
    }
    int appended = PyList_Append(built, obj);
    Py_DECREF(obj);
    return appended;
}

/* Whether the builder still has its class (a collection may clear a builder in a cycle);
   else ValueError naming ``what``. */
static int
usable(Builder *self, const char *what)
{
    if (self->cls == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: the builder was cleared", what);
        return 0;
    }
    return 1;
}

static PyObject *
Builder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *cls_obj, *names;
    static char *keywords[] = {"cls", "names", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!:Builder", keywords, &cls_obj,
                                     &PyTuple_Type, &names)) {
        return NULL;
    }
    if (!PyType_Check(cls_obj)) {
        PyErr_SetString(PyExc_TypeError, "Builder: cls must be a class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)cls_obj;
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (count < 1 || count > MAX_FIELDS) {
        PyErr_Format(PyExc_TypeError, "Builder: %zd fields (1 to %d)", count, MAX_FIELDS);
        return NULL;
    }
    /* Instances made as object.__new__ makes them: a fixed size, the generic allocator. */
    if (cls->tp_new != PyBaseObject_Type.tp_new || cls->tp_itemsize != 0
        || cls->tp_alloc != PyType_GenericAlloc || (cls->tp_flags & Py_TPFLAGS_IS_ABSTRACT)) {
        PyErr_Format(PyExc_TypeError, "Builder: %s is not built as a plain object",
                     cls->tp_name);
        return NULL;
    }
    Builder *self = (Builder *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->count = count;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "Builder: field names must be strings");
            goto fail;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            int same = PyUnicode_Compare(name, PyTuple_GET_ITEM(names, j));
            if (same == -1 && PyErr_Occurred()) {
                goto fail;
            }
            if (same == 0) {
                PyErr_Format(PyExc_TypeError, "Builder: field %R named twice", name);
                goto fail;
            }
        }
        PyObject *descr = PyObject_GetAttr(cls_obj, name);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                goto fail;
            }
            PyErr_Clear();  /* (no such attribute: refused below, as any non-slot is) */
        }
        int usable = descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type);
        if (usable) {
            PyMemberDescrObject *member = (PyMemberDescrObject *)descr;
            PyMemberDef *def = member->d_member;
            usable = def->type == T_OBJECT_EX && !(def->flags & READONLY)
                     && PyType_IsSubtype(cls, PyDescr_TYPE(member))
                     && def->offset >= (Py_ssize_t)sizeof(PyObject)
                     && def->offset + (Py_ssize_t)sizeof(PyObject *) <= cls->tp_basicsize;
            if (usable) {
                self->offsets[i] = def->offset;
            }
        }
        Py_XDECREF(descr);
        if (!usable) {
            PyErr_Format(PyExc_TypeError, "Builder: %R is not a writable slot of %s", name,
                         cls->tp_name);
            goto fail;
        }
    }
    Py_INCREF(cls);
    self->cls = cls;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static int
Builder_traverse(Builder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cls);
    return 0;
}

static int
Builder_clear(Builder *self)
{
    Py_CLEAR(self->cls);
    return 0;
}

static void
Builder_dealloc(Builder *self)
{
    PyObject_GC_UnTrack(self);
    Builder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* make(*values): one instance. */
static PyObject *
Builder_make(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!usable(self, "make")) {
        return NULL;
    }
    if (nargs != self->count) {
        PyErr_Format(PyExc_ValueError, "make: %zd values for %zd fields", nargs, self->count);
        return NULL;
    }
    return make_from(self, args);
}

/* build(rows): an instance per row, a sequence of the fields' values in order. */
static PyObject *
Builder_build(Builder *self, PyObject *rows)
{
    if (!usable(self, "build")) {
        return NULL;
    }
    PyObject *iterator = PyObject_GetIter(rows);
    if (iterator == NULL) {
        return NULL;
    }
    PyObject *built = PyList_New(0);
    if (built == NULL) {
        Py_DECREF(iterator);
        return NULL;
    }
    PyObject *row;
    while ((row = PyIter_Next(iterator)) != NULL) {
        PyObject *values = as_tuple(row, "build: a row");
        Py_DECREF(row);
        if (values == NULL) {
            goto fail;
        }
        if (PyTuple_GET_SIZE(values) != self->count) {
            PyErr_Format(PyExc_ValueError, "build: a row of %zd values for %zd fields",
                         PyTuple_GET_SIZE(values), self->count);
            Py_DECREF(values);
            goto fail;
        }
        int appended = append_made(self, built, &PyTuple_GET_ITEM(values, 0));
        Py_DECREF(values);
        if (appended < 0) {
            goto fail;
        }
    }
    if (PyErr_Occurred()) {
        goto fail;
    }
    Py_DECREF(iterator);
    return built;
fail:
    Py_DECREF(iterator);
    Py_DECREF(built);
    return NULL;
}

/* build_run(key, first, items): an instance per item, its fields key, then first + i,
   then the item's values (a sequence of the other fields' values in order). */
static PyObject *
Builder_build_run(Builder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "build_run(key, first, items) takes 3 arguments");
        return NULL;
    }
    if (!usable(self, "build_run")) {
        return NULL;
    }
    if (self->count < 2) {
        PyErr_SetString(PyExc_TypeError, "build_run: fewer than two fields");
        return NULL;
    }
    PyObject *items = as_tuple(args[2], "build_run: items");
    if (items == NULL) {
        return NULL;
    }
    PyObject *built = PyList_New(0);
    if (built == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    PyObject *values[MAX_FIELDS];
    PyObject *number = Py_NewRef(args[1]);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        if (i > 0) {  /* (first: may run code, so before the item is read) */
            PyObject *next = PyNumber_Add(number, ONE);
            Py_DECREF(number);
            number = next;
            if (number == NULL) {
                goto fail;
            }
        }
        PyObject *item = as_tuple(PyTuple_GET_ITEM(items, i), "build_run: an item");
        if (item == NULL) {
            goto fail;
        }
        if (PyTuple_GET_SIZE(item) != self->count - 2) {
            PyErr_Format(PyExc_ValueError, "build_run: an item of %zd values, not %zd",
                         PyTuple_GET_SIZE(item), self->count - 2);
            Py_DECREF(item);
            goto fail;
        }
        values[0] = args[0];
        values[1] = number;
        for (Py_ssize_t f = 2; f < self->count; f++) {
            values[f] = PyTuple_GET_ITEM(item, f - 2);
        }
        int appended = append_made(self, built, values);
        Py_DECREF(item);
        if (appended < 0) {
            goto fail;
        }
    }
    Py_XDECREF(number);
    Py_DECREF(items);
    return built;
fail:
    Py_XDECREF(number);
    Py_DECREF(items);
    Py_DECREF(built);
    return NULL;
}

static PyMethodDef Builder_methods[] = {
    {"make", (PyCFunction)(void (*)(void))Builder_make, METH_FASTCALL,
     "make(*values): one instance, its slots set to values in field order."},
    {"build", (PyCFunction)Builder_build, METH_O,
     "build(rows): an instance per row, a sequence of values in field order."},
    {"build_run", (PyCFunction)(void (*)(void))Builder_build_run, METH_FASTCALL,
     "build_run(key, first, items): an instance per item: key, first + i, the item's values."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "overlay._slotted.Builder",
    .tp_basicsize = sizeof(Builder),
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_traverse = (traverseproc)Builder_traverse,
    .tp_clear = (inquiry)Builder_clear,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Builder(cls, names): builds instances of cls by writing the named slots.",
    .tp_methods = Builder_methods,
    .tp_new = Builder_new,
};

static struct PyModuleDef slotted_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "overlay._slotted",
    .m_doc = "Instances of a slotted class built by writing their slots.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__slotted(void)
{
    if (PyType_Ready(&BuilderType) < 0) {
        return NULL;
    }
    if (ONE == NULL && (ONE = PyLong_FromLong(1)) == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&slotted_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(module, "Builder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
