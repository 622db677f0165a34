// The only file that knows Python exists. Plain data crosses in bulk; the GIL is released around
// every loop over text. C++ errors become tokenmill.errors.InputError (a TokenmillError) here and only here.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tokenmill/bert.h"
#include "tokenmill/bpe.h"
#include "tokenmill/bpe_trainer.h"
#include "tokenmill/count.h"
#include "tokenmill/decode_table.h"
#include "tokenmill/encode.h"
#include "tokenmill/error.h"
#include "tokenmill/pretokenize.h"
#include "tokenmill/unicode.h"
#include "tokenmill/ranks_file.h"
#include "tokenmill/sp_encode.h"
#include "tokenmill/wordpiece.h"
#include "tokenmill/wordpiece_trainer.h"
#include "tokenmill/sp_normalizer.h"
#include "tokenmill/unigram.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using tokenmill::BPEModel;
using tokenmill::BPEOptions;
using tokenmill::Merge;

// Python ints for token ids, made once and shared: a list of ids then costs a pointer per token
// instead of an allocation. Ids below kIntCache are kept, in memory whose pages are taken as they
// are first written, so a tokenizer pays for the ids it emits only. Touched with the GIL held only.
//
// Each page holds its ints themselves, in id order, not pointers to ints made one by one. An
// int here is a copy of one CPython made, holding a reference of its own that is never given
// back, so it is never freed; a bit of int_made says which are made, so building a list of ids
// reads none of the ints to find out. Ids 0..256 are kept here too, not taken from CPython's
// own small ints: equal, but not the same objects (`is` tells them apart); choosing between
// the two cost a mispredicted branch every few tokens.
//
// Up to CPython 3.11, on 64-bit builds, a kept int's reference count starts so high (2^60) that
// no run of a process can count it down to zero, and a list takes it without an increment: the
// list's ints are then neither read nor written. The increment was a cache miss a token on the
// ints of rare tokens, most of the time that building the lists of a first pass took. CPython
// 3.12 does the same for its own immortal objects but keeps the count in 32 bits (3.14 stores
// only those), so there the ints are counted as usual.
//
// Where an object's header is more than its reference count and type (a debug build that
// counts or links every reference, a build without the GIL), the ints are made one by one and
// counted as usual.
constexpr uint32_t kIntPageBits = 12;
constexpr uint32_t kIntPageIds = 1u << kIntPageBits;
constexpr uint32_t kIntCache = 1u << 20;

#if !defined(Py_TRACE_REFS) && !defined(Py_REF_DEBUG) && !defined(Py_GIL_DISABLED)
#define TOKENMILL_KEPT_INTS 1
#if PY_VERSION_HEX < 0x030C0000 && SIZEOF_VOID_P == 8
// 2^60 references: a decrement a nanosecond would take 36 years to end them.
constexpr Py_ssize_t kKeptReferences = Py_ssize_t{1} << 60;
constexpr bool kIntsCounted = false;
#else
constexpr Py_ssize_t kKeptReferences = 1;  // the page's own
constexpr bool kIntsCounted = true;
#endif
struct alignas(32) IntSlot {
  unsigned char bytes[32];
};
static_assert(sizeof(PyLongObject) <= sizeof(IntSlot), "an int of one digit fits a slot");
// The slots of every id below kIntCache, one allocation (32 MiB of address space, whose pages
// the system gives as they are first written): a kept int is at int_slots + id, found with a
// shift and an add where a table of pages took two loads.
IntSlot* int_slots = nullptr;
uint64_t int_made[kIntCache / 64];

// The slots' memory, made once (false if it could not be had).
bool have_int_slots() {
  if (int_slots == nullptr) {
    int_slots = static_cast<IntSlot*>(
        std::aligned_alloc(alignof(IntSlot), std::size_t{kIntCache} * sizeof(IntSlot)));
  }
  return int_slots != nullptr;
}

// Whether the int `id` is kept and made (then it is int_slots[id]).
[[gnu::always_inline]] inline bool id_kept(uint32_t id) {
  return id < kIntCache && ((int_made[id >> 6] >> (id & 63)) & 1) != 0;
}

// Kept ints past CPython's small ones (one digit each, every id below kIntCache being under
// 2^30) are made from a template: a real int's bytes with the digit put in, where making each
// with PyLong_FromUnsignedLong, copying it and freeing it again was 5% of a first pass over
// code (cl100k_base: 20,000 ids met for the first time). Where the digit sits is found on a
// real int, and checked on a second one before the template is used; if either fails (another
// layout), every int is made as before.
struct IntTemplate {
  unsigned char bytes[sizeof(PyLongObject)];
  std::size_t digit_at;  // where the one digit's 32 bits are
  int state;             // 0: not looked at yet, 1: in use, 2: not usable
};
IntTemplate int_template;

constexpr uint32_t kFirstTemplated = 257;  // CPython's own small ints end before it

// The int `id` made at obj from the template; false if it cannot be (obj untouched).
bool int_from_template(uint32_t id, PyObject* obj) {
  constexpr uint32_t kProbe = 0x5A5A5;
  constexpr uint32_t kCheck = 0x3C3C3;
  static_assert(kIntCache <= (uint32_t{1} << 30), "every kept id is one digit");
  if (id < kFirstTemplated) return false;
  IntTemplate& t = int_template;
  if (t.state == 0) {
    t.state = 2;
    PyObject* probe = PyLong_FromUnsignedLong(kProbe);
    PyObject* check = PyLong_FromUnsignedLong(kCheck);
    if (probe != nullptr && check != nullptr) {
      std::memcpy(t.bytes, static_cast<void*>(probe), sizeof(PyLongObject));
      for (std::size_t at = sizeof(PyObject); at + 4 <= sizeof(PyLongObject); at += 4) {
        uint32_t digit = 0;
        std::memcpy(&digit, t.bytes + at, 4);
        if (digit != kProbe) continue;
        unsigned char trial[sizeof(PyLongObject)];
        std::memcpy(trial, t.bytes, sizeof(trial));
        std::memcpy(trial + at, &kCheck, 4);
        // (the reference count aside; nothing past the digit is compared)
        constexpr std::size_t kFrom = sizeof(Py_ssize_t);
        if (std::memcmp(trial + kFrom, reinterpret_cast<unsigned char*>(check) + kFrom,
                        at + 4 - kFrom) == 0) {
          t.digit_at = at;
          t.state = 1;
        }
        break;
      }
    }
    if (probe == nullptr || check == nullptr) PyErr_Clear();  // (the ints are made as before)
    Py_XDECREF(probe);
    Py_XDECREF(check);
  }
  if (t.state != 1) return false;
  std::memcpy(static_cast<void*>(obj), t.bytes, sizeof(PyLongObject));
  std::memcpy(reinterpret_cast<unsigned char*>(obj) + t.digit_at, &id, 4);
  return true;
}

// id_object's way for an int not made yet, and for ids past the cache.
[[gnu::noinline]] PyObject* make_id_object(uint32_t id) {
  if (id >= kIntCache) return PyLong_FromUnsignedLong(id);
  // (a slot is read only once int_made says it holds an int)
  if (!have_int_slots()) return PyErr_NoMemory();
  PyObject* obj = reinterpret_cast<PyObject*>(&int_slots[id]);
  if (!int_from_template(id, obj)) {
    PyObject* made = PyLong_FromUnsignedLong(id);
    if (made == nullptr) return nullptr;
    std::memcpy(static_cast<void*>(obj), made, sizeof(PyLongObject));
    Py_DECREF(made);
  }
  Py_SET_REFCNT(obj, kKeptReferences);  // (from 3.12, a copy of an immortal int stays immortal)
  int_made[id >> 6] |= uint64_t{1} << (id & 63);
  if constexpr (kIntsCounted) Py_INCREF(obj);
  return obj;
}

// The kept ints of ids below n (from CPython's small ones' end on), made now, when a model is
// built, rather than one at a time as the first lists meet their ids. A text meets ids all
// over a vocabulary: a first pass over 4 MB of English met ids on every one of the 1,563
// pages that o200k_base's take (128 ids a page), so a process that makes lists of ids takes
// those pages anyway. They are asked for in one call (MADV_POPULATE_WRITE, Linux 5.14 on:
// a first pass's page faults 2,622 -> 1,059), and the ints written from the template (about
// 1 ms for o200k_base's 200,000), where making each as a first pass met it was 6% of that
// pass. Without a usable template the ints are made as they are met, as before. With the
// GIL held.
//
// The ints of CPython's small ones' ids are kept too (copies, as make_id_object makes them), so
// that every id below kept_below has its int made: id_list takes those without a look at
// int_made, whose 128 KiB it read a token, at random, where a comparison does.
uint32_t kept_below = 0;

void make_kept_ints(std::size_t n) {
  static std::size_t made_below = 0;
  n = std::min<std::size_t>(n, kIntCache);
  if (n <= made_below || !have_int_slots()) return;
  tokenmill::populate_pages(int_slots + made_below, (n - made_below) * sizeof(IntSlot));
  for (auto id = static_cast<uint32_t>(made_below); id < std::min<std::size_t>(n, kFirstTemplated);
       ++id) {
    if (id_kept(id)) continue;
    // (Counted ints: the reference returned is one more than the slot's own, never given back.)
    PyObject* made = make_id_object(id);
    if (made == nullptr) {
      PyErr_Clear();  // (made when first met instead, as before)
      break;
    }
  }
  for (auto id = static_cast<uint32_t>(std::max<std::size_t>(made_below, kFirstTemplated));
       id < n; ++id) {
    if (id_kept(id)) continue;
    PyObject* obj = reinterpret_cast<PyObject*>(&int_slots[id]);
    if (!int_from_template(id, obj)) break;
    Py_SET_REFCNT(obj, kKeptReferences);
    int_made[id >> 6] |= uint64_t{1} << (id & 63);
  }
  made_below = n;
  while (kept_below < n && id_kept(kept_below)) ++kept_below;
}

// A reference to the kept int `id` (id_kept holds; slots: int_slots).
[[gnu::always_inline]] inline PyObject* kept_int(IntSlot* slots, uint32_t id) {
  PyObject* obj = reinterpret_cast<PyObject*>(&slots[id]);
  if constexpr (kIntsCounted) Py_INCREF(obj);
  return obj;
}

// A reference to the int `id` (a new one, or a kept int's).
inline PyObject* id_object(uint32_t id) {
  return id_kept(id) ? kept_int(int_slots, id) : make_id_object(id);
}
#else
PyObject** int_pages[kIntCache >> kIntPageBits];

PyObject* id_object(uint32_t id) {
  if (id >= kIntCache) return PyLong_FromUnsignedLong(id);
  PyObject**& page = int_pages[id >> kIntPageBits];
  if (page == nullptr) {
    page = new PyObject*[kIntPageIds]();
  }
  PyObject*& slot = page[id & (kIntPageIds - 1)];
  if (slot == nullptr) {
    slot = PyLong_FromUnsignedLong(id);
    if (slot == nullptr) return nullptr;
  }
  Py_INCREF(slot);
  return slot;
}

void make_kept_ints(std::size_t) {}  // (ints made one by one as they are met)
#endif

// Lists of this many ids or more get an item array that is not zeroed first. PyList_New
// zeroes it (a calloc), then id_list writes every item again: for the list of one 1 MB text
// (683,000 ids of base64) that was a pass of 5.5 MB, 3.8% of the call's instructions. A
// smaller array comes from CPython's small-object allocator, where the zeroing is a few
// stores.
constexpr std::size_t kUnzeroedItems = 1024;

// A new list with room for n items, of which it holds none yet: id_list writes them all,
// then sets its size. `items` is its item array.
PyObject* new_id_list(std::size_t n, PyObject**& items) {
#if !defined(Py_GIL_DISABLED) && !defined(Py_LIMITED_API)
  // (A free-threaded build's lists keep their arrays otherwise; elsewhere a list's array is
  // PyMem memory, which list_dealloc gives back with PyMem_Free.)
  if (n >= kUnzeroedItems) {
    if (n > static_cast<std::size_t>(PY_SSIZE_T_MAX) / sizeof(PyObject*)) {
      PyErr_NoMemory();
      return nullptr;
    }
    PyObject* list = PyList_New(0);
    if (list == nullptr) return nullptr;
    items = static_cast<PyObject**>(PyMem_Malloc(n * sizeof(PyObject*)));
    if (items == nullptr) {
      Py_DECREF(list);
      PyErr_NoMemory();
      return nullptr;
    }
    auto* l = reinterpret_cast<PyListObject*>(list);
    l->ob_item = items;
    l->allocated = static_cast<Py_ssize_t>(n);
    return list;  // (of size 0: nothing is read from the array before id_list sets the size)
  }
#endif
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
  if (list != nullptr) items = reinterpret_cast<PyListObject*>(list)->ob_item;
  return list;
}

// ids[0, n) -> a new Python list, built with the GIL held. Values from make_below on are made
// as ints of their own unless kept already (character offsets: a long text's would otherwise
// keep an int for each of its offsets for the life of the process).
nb::object id_list(const uint32_t* ids, std::size_t n, uint32_t make_below = kIntCache) {
  PyObject** items = nullptr;
  PyObject* list = new_id_list(n, items);
  if (list == nullptr) throw nb::python_error();
#ifdef TOKENMILL_KEPT_INTS
  IntSlot* slots = int_slots;  // (read again after each new int: the first one sets it)
  const uint32_t all_kept = kept_below;
#endif
  for (std::size_t i = 0; i < n; ++i) {
#ifdef TOKENMILL_KEPT_INTS
    // (id_object's first way, on its own: merged with the other, the compiler tested every
    // kept int for null as it tests a new one)
    if (ids[i] < all_kept || id_kept(ids[i])) {
      items[i] = kept_int(slots, ids[i]);
      continue;
    }
#endif
    PyObject* v = ids[i] < make_below ? id_object(ids[i]) : PyLong_FromUnsignedLong(ids[i]);
    if (v == nullptr) {
      Py_SET_SIZE(list, static_cast<Py_ssize_t>(i));  // the items written so far
      Py_DECREF(list);
      throw nb::python_error();
    }
    items[i] = v;
#ifdef TOKENMILL_KEPT_INTS
    slots = int_slots;
#endif
  }
  Py_SET_SIZE(list, static_cast<Py_ssize_t>(n));
  // Out of the cyclic collector's sight: a list of ints cannot be part of a cycle, and walking
  // every id list of a batch at each collection was a fifth of encoding English one paragraph a
  // list. (A caller who later puts a container in it that leads back to it makes a cycle that is
  // freed only once broken; a list only ever holds what it was given, and these hold ints.)
  PyObject_GC_UnTrack(list);
  return nb::steal(list);
}

nb::object id_list(const std::vector<uint32_t>& ids) { return id_list(ids.data(), ids.size()); }

namespace {

// An int, a float, a string or None: an object that refers to no other.
bool atomic(PyObject* item) {
  return PyLong_CheckExact(item) || PyUnicode_CheckExact(item) || PyFloat_CheckExact(item) ||
         item == Py_None;
}

// atomic, or a tuple of such (a merge's two tokens, an offset pair).
bool atomic_or_flat_tuple(PyObject* item) {
  if (atomic(item)) return true;
  if (!PyTuple_CheckExact(item)) return false;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(item); i < n; ++i) {
    if (!atomic(PyTuple_GET_ITEM(item, i))) return false;
  }
  return true;
}

// Takes a list whose items are all atomic or tuples of atomic items out of the collector's
// sight; whether it is out of it (now or before).
bool untrack_flat_list(PyObject* list) {
  if (!PyObject_GC_IsTracked(list)) return true;
  for (Py_ssize_t i = 0, n = PyList_GET_SIZE(list); i < n; ++i) {
    if (!atomic_or_flat_tuple(PyList_GET_ITEM(list, i))) return false;
  }
  PyObject_GC_UnTrack(list);
  return true;
}

}  // namespace

// Each list given that holds only ints, floats, strings, None and tuples of those, taken out
// of the cyclic collector's sight as id_list's are: an Encoding's lists made in Python (a
// template's layout, a pad) were walked at every run of the collector, half the time of
// encoding MiniLM's lines one a call while their encodings were kept; and a BPE model's merges
// (two lists of 59,000 pairs and 177,000 ints for Mistral) were walked item by item at every
// full run, most of its time. Other objects, and lists holding anything else, are left.
void untrack_lists(const nb::args& objects) {
  for (nb::handle h : objects) {
    if (PyList_CheckExact(h.ptr())) untrack_flat_list(h.ptr());
  }
}

// An Encoding's own list, tuple or dict (its ids, its (starts, ends), its sequences' token
// ranges, its words' parts), or a frozenset or dict of classes kept for the process, taken out
// of the collector's sight when each item is atomic, a tuple of atomic items, or a list
// untrack_flat_list takes out (first). CPython keeps a tuple that holds a list tracked for
// good, and a dict whose values were new tuples. Anything else is left.
void untrack_part(PyObject* o) {
  if (!PyObject_GC_IsTracked(o)) return;
  auto settled = [](PyObject* item) {
    return atomic_or_flat_tuple(item) || (PyList_CheckExact(item) && untrack_flat_list(item));
  };
  bool flat = true;
  if (PyList_CheckExact(o)) {
    untrack_flat_list(o);
    return;
  }
  if (PyTuple_CheckExact(o)) {
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(o); i < n && flat; ++i) {
      flat = settled(PyTuple_GET_ITEM(o, i));
    }
  } else if (PyDict_CheckExact(o)) {
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t at = 0;
    while (flat && PyDict_Next(o, &at, &key, &value)) flat = atomic(key) && settled(value);
  } else if (PyFrozenSet_CheckExact(o)) {
    PyObject* items = PyObject_GetIter(o);
    if (items == nullptr) throw nb::python_error();
    PyObject* key = nullptr;
    while (flat && (key = PyIter_Next(items)) != nullptr) {
      flat = atomic(key);
      Py_DECREF(key);
    }
    Py_DECREF(items);
    if (PyErr_Occurred()) throw nb::python_error();
  } else {
    return;
  }
  if (flat) PyObject_GC_UnTrack(o);
}

void untrack_parts(const nb::args& objects) {
  for (nb::handle h : objects) untrack_part(h.ptr());
}

// A new list, untracked (it holds ints: see untrack_lists), of len(before) items, then n,
// then len(after): before's items or before_pad in each of the first, part's first n items or
// part_pad (part null), after's items or after_pad (each pad, where not null, in every place).
// before, after and a part given are lists, part holding n items or more.
PyObject* joined_list(PyObject* before, PyObject* part, Py_ssize_t n, PyObject* part_pad,
                      PyObject* after, PyObject* before_pad, PyObject* after_pad) {
  const Py_ssize_t k = PyList_GET_SIZE(before);
  const Py_ssize_t m = PyList_GET_SIZE(after);
  PyObject* list = PyList_New(k + n + m);
  if (list == nullptr) return nullptr;
  // (The allocation may run the collector, and a finalizer could in principle change a list:
  // the sizes are read again, with nothing yet written.)
  if (PyList_GET_SIZE(before) != k || PyList_GET_SIZE(after) != m ||
      (part != nullptr && PyList_GET_SIZE(part) < n)) {
    Py_DECREF(list);
    PyErr_SetString(PyExc_RuntimeError, "lay_out_single: a list changed size while in use");
    return nullptr;
  }
  PyObject** out = reinterpret_cast<PyListObject*>(list)->ob_item;
  auto put = [&](Py_ssize_t at, PyObject* item) {
    Py_INCREF(item);
    out[at] = item;
  };
  for (Py_ssize_t i = 0; i < k; ++i) {
    put(i, before_pad != nullptr ? before_pad : PyList_GET_ITEM(before, i));
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    put(k + i, part != nullptr ? PyList_GET_ITEM(part, i) : part_pad);
  }
  for (Py_ssize_t i = 0; i < m; ++i) {
    put(k + n + i, after_pad != nullptr ? after_pad : PyList_GET_ITEM(after, i));
  }
  PyObject_GC_UnTrack(list);
  return list;
}

// A template's single layout, special ids around one input (TemplateProcessing._around_single):
// the ids, starts, ends and special-tokens mask of before + the input + after, the special
// tokens spanning (0, 0); four new lists, untracked. Made here in one pass, where five list
// concatenations and an untracking call took a microsecond of a line's encode. With
// one_word, a fifth: the word ids of an input that is one word (None for the special tokens).
nb::tuple lay_out_single(nb::handle before, nb::handle ids, nb::handle starts, nb::handle ends,
                         nb::handle after, bool one_word) {
  for (nb::handle h : {before, ids, starts, ends, after}) {
    if (!PyList_CheckExact(h.ptr())) throw nb::type_error("lay_out_single takes five lists");
  }
  const Py_ssize_t n = PyList_GET_SIZE(ids.ptr());
  if (PyList_GET_SIZE(starts.ptr()) != n || PyList_GET_SIZE(ends.ptr()) != n) {
    throw nb::value_error("lay_out_single: ids, starts and ends differ in length");
  }
  const nb::int_ zero_int(0);
  const nb::int_ one_int(1);
  PyObject* const zero = zero_int.ptr();
  PyObject* const one = one_int.ptr();
  PyObject* b = before.ptr();
  PyObject* a = after.ptr();
  nb::object lists[4];
  lists[0] = nb::steal(joined_list(b, ids.ptr(), n, nullptr, a, nullptr, nullptr));
  lists[1] = nb::steal(joined_list(b, starts.ptr(), n, nullptr, a, zero, zero));
  lists[2] = nb::steal(joined_list(b, ends.ptr(), n, nullptr, a, zero, zero));
  lists[3] = nb::steal(joined_list(b, nullptr, n, zero, a, one, one));
  for (const nb::object& l : lists) {
    if (!l.is_valid()) throw nb::python_error();
  }
  if (!one_word) return nb::make_tuple(lists[0], lists[1], lists[2], lists[3]);
  nb::object words = nb::steal(joined_list(b, nullptr, n, zero, a, Py_None, Py_None));
  if (!words.is_valid()) throw nb::python_error();
  return nb::make_tuple(lists[0], lists[1], lists[2], lists[3], words);
}

// A template's layout of any shape (TemplateProcessing._around_pieces): `pieces` in order, each a
// list of special ids (spanning (0, 0), special-tokens mask 1) or an input as a tuple of its
// ids, starts and ends lists (mask 0); `types` the type id each piece's tokens take. Returns
// the ids, starts, ends, type ids (None where every one is 0) and special-tokens mask as new
// untracked lists: the walk over a pair's parts in Python was most of a Mistral pair's encode.
nb::tuple lay_out_pieces(nb::handle pieces, nb::handle types) {
  // Each piece's size and whether any type id is not 0, every piece and type id checked.
  auto measure = [&](std::vector<Py_ssize_t>& sizes, bool& typed) {
    if (!PyList_CheckExact(pieces.ptr()) || !PyList_CheckExact(types.ptr()) ||
        PyList_GET_SIZE(pieces.ptr()) != PyList_GET_SIZE(types.ptr())) {
      throw nb::type_error("lay_out_pieces takes a list of pieces and a list of as many type ids");
    }
    const Py_ssize_t count = PyList_GET_SIZE(pieces.ptr());
    sizes.assign(static_cast<std::size_t>(count), 0);
    typed = false;
    Py_ssize_t total = 0;
    for (Py_ssize_t p = 0; p < count; ++p) {
      PyObject* piece = PyList_GET_ITEM(pieces.ptr(), p);
      Py_ssize_t n = 0;
      if (PyList_CheckExact(piece)) {
        n = PyList_GET_SIZE(piece);
      } else if (PyTuple_CheckExact(piece) && PyTuple_GET_SIZE(piece) == 3) {
        for (Py_ssize_t k = 0; k < 3; ++k) {
          if (!PyList_CheckExact(PyTuple_GET_ITEM(piece, k))) {
            throw nb::type_error("lay_out_pieces: an input is a tuple of three lists");
          }
        }
        n = PyList_GET_SIZE(PyTuple_GET_ITEM(piece, 0));
        if (PyList_GET_SIZE(PyTuple_GET_ITEM(piece, 1)) != n ||
            PyList_GET_SIZE(PyTuple_GET_ITEM(piece, 2)) != n) {
          throw nb::value_error(
              "lay_out_pieces: an input's ids, starts and ends differ in length");
        }
      } else {
        throw nb::type_error(
            "lay_out_pieces: a piece is a list of ids or a tuple of three lists");
      }
      PyObject* type_id = PyList_GET_ITEM(types.ptr(), p);
      if (!PyLong_CheckExact(type_id)) {
        throw nb::type_error("lay_out_pieces: a type id is an int");
      }
      typed = typed || PyObject_IsTrue(type_id) != 0;  // (an exact int: never fails)
      if (n > PY_SSIZE_T_MAX / 8 - total) throw nb::value_error("lay_out_pieces: too many ids");
      sizes[static_cast<std::size_t>(p)] = n;
      total += n;
    }
    return total;
  };
  std::vector<Py_ssize_t> sizes;
  bool typed = false;
  const Py_ssize_t total = measure(sizes, typed);
  const nb::int_ zero_int(0);
  const nb::int_ one_int(1);
  nb::object lists[5];
  for (int k = 0; k < 5; ++k) {
    if (k == 3 && !typed) continue;
    lists[k] = nb::steal(PyList_New(total));
    if (!lists[k].is_valid()) throw nb::python_error();
  }
  // An allocation may run the collector, and a finalizer may change what it can reach: every
  // piece is checked again, and must be as it was, before anything is written (a list holds
  // only what was put in it).
  {
    std::vector<Py_ssize_t> again;
    bool typed_again = false;
    if (measure(again, typed_again) != total || again != sizes || typed_again != typed) {
      throw std::runtime_error("lay_out_pieces: a list changed while in use");
    }
  }
  const Py_ssize_t count = static_cast<Py_ssize_t>(sizes.size());
  PyObject** out[5] = {};
  for (int k = 0; k < 5; ++k) {
    if (lists[k].is_valid()) out[k] = reinterpret_cast<PyListObject*>(lists[k].ptr())->ob_item;
  }
  auto put = [](PyObject** to, Py_ssize_t at, PyObject* item) {
    Py_INCREF(item);
    to[at] = item;
  };
  Py_ssize_t at = 0;
  for (Py_ssize_t p = 0; p < count; ++p) {
    PyObject* piece = PyList_GET_ITEM(pieces.ptr(), p);
    PyObject* type_id = PyList_GET_ITEM(types.ptr(), p);
    const Py_ssize_t n = sizes[static_cast<std::size_t>(p)];
    const bool input = PyTuple_CheckExact(piece);
    PyObject* ids = input ? PyTuple_GET_ITEM(piece, 0) : piece;
    for (Py_ssize_t i = 0; i < n; ++i) {
      put(out[0], at + i, PyList_GET_ITEM(ids, i));
      put(out[1], at + i, input ? PyList_GET_ITEM(PyTuple_GET_ITEM(piece, 1), i) : zero_int.ptr());
      put(out[2], at + i, input ? PyList_GET_ITEM(PyTuple_GET_ITEM(piece, 2), i) : zero_int.ptr());
      if (out[3] != nullptr) put(out[3], at + i, type_id);
      put(out[4], at + i, input ? zero_int.ptr() : one_int.ptr());
    }
    at += n;
  }
  for (const nb::object& l : lists) {
    if (l.is_valid()) PyObject_GC_UnTrack(l.ptr());
  }
  return nb::make_tuple(lists[0], lists[1], lists[2], typed ? lists[3] : nb::none(), lists[4]);
}

// The cyclic collector's automatic runs held off while a batch's id lists are built (with the
// GIL held throughout): each list allocated counts toward the next run, so a batch of 20,000
// paragraphs set off dozens, some walking every object the process tracks, for lists that
// cannot form a cycle. The count carries over: the first allocation after may start one run.
class CollectorPaused {
 public:
  CollectorPaused() : was_enabled_(PyGC_Disable() != 0) {}
  ~CollectorPaused() {
    if (was_enabled_) PyGC_Enable();
  }
  CollectorPaused(const CollectorPaused&) = delete;
  CollectorPaused& operator=(const CollectorPaused&) = delete;

 private:
  bool was_enabled_;
};

// Work on texts shorter than this keeps the GIL: releasing and taking it back costs more than
// a short text takes to scan.
constexpr std::size_t kReleaseGilAbove = 4096;

// A one-thread batch of id lists is encoded this much text at a time (bytes of the str's code
// units): ids of this much text stay in the second-level cache.
constexpr std::size_t kListRangeUnits = std::size_t{1} << 17;

// An int's value when it is below 2^30 and not negative (every id of a real vocabulary), read
// from the object itself: a call to PyLong_AsLongLongAndOverflow a token was a fifth of
// decoding English. False for any other int.
inline bool small_id(PyObject* item, uint32_t& id) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject*>(item))) return false;
  const Py_ssize_t v = PyUnstable_Long_CompactValue(reinterpret_cast<PyLongObject*>(item));
  if (v < 0) return false;
  id = static_cast<uint32_t>(v);
  return true;
#else
  // Before 3.12: the size is the count of digits (PyLong_SHIFT bits each), negative for a
  // negative int; one digit holds the whole value.
  const Py_ssize_t size = Py_SIZE(item);
  if (size == 0) {
    id = 0;
    return true;
  }
  if (size != 1) return false;
  id = static_cast<uint32_t>(reinterpret_cast<PyLongObject*>(item)->ob_digit[0]);
  return true;
#endif
}

#ifdef TOKENMILL_KEPT_INTS
// The id of a kept int, from where the item points, the int itself not read: the lists the
// encoders return hold kept ints, and reading each one (its type, its size and its digit) was
// a miss in the cache a token for all but the commonest (32 bytes each, 3.2 MB of ints for
// cl100k_base). False for any other object.
inline bool kept_id(PyObject* item, uint32_t& id) {
  if (int_slots == nullptr) return false;
  const std::uintptr_t at =
      reinterpret_cast<std::uintptr_t>(item) - reinterpret_cast<std::uintptr_t>(int_slots);
  if (at >= std::uintptr_t{kIntCache} * sizeof(IntSlot) || at % sizeof(IntSlot) != 0) {
    return false;
  }
  // (No test of int_made: an object in that memory is a kept int, as nothing else is made
  // there, and a list holds objects.)
  id = static_cast<uint32_t>(at / sizeof(IntSlot));
  return true;
}
#endif

// The ids of a one-dimensional, contiguous array of integers that exports a buffer (numpy's,
// array.array), read in place: 1 if every item is in [0, 2^32), 0 if one is not, -1 if the
// object is no such array (the caller converts it item by item: a numpy array's items one by
// one cost 60 ns each, most of decoding a model's output).
const bool kLittleEndianHost = [] {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}();

int read_buffer_ids(PyObject* o, std::vector<uint32_t>& out) {
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    return -1;
  }
  const char* format = view.format != nullptr ? view.format : "B";
  if (*format == '@' || *format == '=' || (*format == '<' && kLittleEndianHost)) ++format;
  const char kind = format[0];
  const bool is_signed = kind == 'b' || kind == 'h' || kind == 'i' || kind == 'l' ||
                         kind == 'q' || kind == 'n';
  const bool is_unsigned = kind == 'B' || kind == 'H' || kind == 'I' || kind == 'L' ||
                           kind == 'Q' || kind == 'N';
  const std::size_t size = static_cast<std::size_t>(view.itemsize);
  if (view.ndim != 1 || format[1] != '\0' || !(is_signed || is_unsigned) ||
      (size != 1 && size != 2 && size != 4 && size != 8) ||
      static_cast<std::size_t>(view.len) % size != 0) {
    PyBuffer_Release(&view);
    return -1;
  }
  const std::size_t n = static_cast<std::size_t>(view.len) / size;
  const auto* bytes = static_cast<const unsigned char*>(view.buf);
  out.resize(n);
  int result = 1;
  for (std::size_t k = 0; k < n; ++k) {
    int64_t value = 0;
    const unsigned char* at = bytes + k * size;
    if (size == 1) {
      value = is_signed ? int64_t{static_cast<int8_t>(at[0])} : int64_t{at[0]};
    } else if (size == 2) {
      uint16_t v;
      std::memcpy(&v, at, 2);
      value = is_signed ? int64_t{static_cast<int16_t>(v)} : int64_t{v};
    } else if (size == 4) {
      uint32_t v;
      std::memcpy(&v, at, 4);
      value = is_signed ? int64_t{static_cast<int32_t>(v)} : int64_t{v};
    } else {
      uint64_t v;
      std::memcpy(&v, at, 8);
      if (!is_signed && v > 0xFFFFFFFFull) {
        result = 0;
        break;
      }
      value = static_cast<int64_t>(v);
    }
    if (value < 0 || value > 0xFFFFFFFFLL) {
      result = 0;
      break;
    }
    out[k] = static_cast<uint32_t>(value);
  }
  PyBuffer_Release(&view);
  return result;
}

// A sequence of ids as 32-bit values: a list or tuple of ints read in place (the common case:
// what the encoders return), anything else through nanobind's conversion. False if an item is
// not an int in [0, 2^32) (the callers raise TypeError, as a failed conversion of the
// arguments would).
bool read_ids(nb::handle seq, std::vector<uint32_t>& out) {
  PyObject* const o = seq.ptr();
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** const items = PySequence_Fast_ITEMS(o);
    out.resize(static_cast<std::size_t>(n));
    Py_ssize_t i = 0;
    for (; i < n; ++i) {
      uint32_t& id = out[static_cast<std::size_t>(i)];
#ifdef TOKENMILL_KEPT_INTS
      if (kept_id(items[i], id)) continue;
#endif
      if (!PyLong_CheckExact(items[i])) break;
      if (small_id(items[i], id)) continue;
      int overflow = 0;
      const long long x = PyLong_AsLongLongAndOverflow(items[i], &overflow);
      if (overflow != 0 || x < 0 || x > 0xFFFFFFFFLL) return false;
      id = static_cast<uint32_t>(x);
    }
    if (i == n) return true;  // else an int subclass or another kind of number: converted below
  }
  if (PyObject_CheckBuffer(o)) {
    const int read = read_buffer_ids(o, out);
    if (read >= 0) return read == 1;
  }
  std::vector<uint32_t> converted;
  if (!nb::try_cast(seq, converted)) return false;
  out = std::move(converted);
  return true;
}

// Ids decoded below this many keep the GIL (a request's reply, a paragraph): releasing and
// taking it back cost as much as the decoding.
constexpr std::size_t kDecodeReleaseGilAbove = 1u << 14;

// The bytes of ids (tokens of a byte-level model), leaving out `skip`, put in `out`; false if
// it stopped before the end, at an id that is no plain token or is in `stop` (the caller then
// takes the general path, which names a bad id).
bool decode_into(const BPEModel& model, nb::handle ids_seq, nb::handle skip_seq,
                 nb::handle stop_seq, std::string& out) {
  // (Buffers of this call's own: converting an object of another kind may run Python code,
  // which may decode too.)
  std::vector<uint32_t> ids, skip, stop;
  if (!read_ids(ids_seq, ids) || !read_ids(skip_seq, skip) || !read_ids(stop_seq, stop)) {
    throw nb::type_error("ids, skip and stop must be sequences of ints in [0, 2**32)");
  }
  std::optional<nb::gil_scoped_release> release;
  if (ids.size() > kDecodeReleaseGilAbove) release.emplace();
  return model.decode_bytes(ids, skip, stop, out) == ids.size();
}

// Decoded bytes as Python sees them: a str (invalid UTF-8 replaced with U+FFFD, as
// bytes.decode(errors="replace")) when `text`, in one call and no bytes object between (a
// paragraph's decode spent as long in the calls around the core as in it); else bytes.
nb::object decoded_object(const std::string& out, bool text) {
  if (!text) return nb::bytes(out.data(), out.size());
  PyObject* decoded =
      PyUnicode_DecodeUTF8(out.data(), static_cast<Py_ssize_t>(out.size()), "replace");
  if (decoded == nullptr) throw nb::python_error();
  return nb::steal(decoded);
}

// decode_into as bytes, or None where it stopped before the end.
nb::object decode_model_bytes(const BPEModel& model, nb::handle ids_seq, nb::handle skip_seq,
                              nb::handle stop_seq) {
  std::string out;  // sized by decode_bytes
  if (!decode_into(model, ids_seq, skip_seq, stop_seq, out)) return nb::none();
  return decoded_object(out, false);
}

// decode_into as text, or None.
nb::object decode_model_text(const BPEModel& model, nb::handle ids_seq, nb::handle skip_seq,
                             nb::handle stop_seq) {
  std::string out;
  if (!decode_into(model, ids_seq, skip_seq, stop_seq, out)) return nb::none();
  return decoded_object(out, true);
}

// A DecodeTable from the Python side's flat arrays: `text`, the bytes of every entry's text
// one after another; `ends`, native uint32, where each entry's text ends in it (the entries of
// ids 0..n-1, then their first entries); `byte_values`, native int16, one an entry (see
// DecodeEntry); `special`, one byte an id.
void make_decode_table(tokenmill::DecodeTable* self, nb::bytes text, nb::bytes ends,
                       nb::bytes byte_values, nb::bytes special) {
  const std::size_t n = special.size();
  if (ends.size() != 2 * n * sizeof(uint32_t) || byte_values.size() != 2 * n * sizeof(int16_t)) {
    throw nb::value_error("a decode table's arrays disagree on the number of ids");
  }
  std::vector<tokenmill::DecodeEntry> entries(n), first(n);
  const auto* e_bytes = static_cast<const char*>(ends.data());
  const auto* b_bytes = static_cast<const char*>(byte_values.data());
  const auto* s_bytes = static_cast<const unsigned char*>(static_cast<const void*>(special.c_str()));
  uint32_t begin = 0;
  for (std::size_t k = 0; k < 2 * n; ++k) {
    tokenmill::DecodeEntry& e = k < n ? entries[k] : first[k - n];
    e.begin = begin;
    std::memcpy(&e.end, e_bytes + 4 * k, 4);
    std::memcpy(&e.byte, b_bytes + 2 * k, 2);
    e.special = s_bytes[k % n] != 0;
    begin = e.end;
  }
  try {
    new (self) tokenmill::DecodeTable(std::string(text.c_str(), text.size()),
                                      std::move(entries), std::move(first));
  } catch (const std::invalid_argument& e) {
    throw nb::value_error(e.what());
  }
}

// The text of ids through a DecodeTable (as str, or as bytes when `text` is false), or None
// at an id the table does not hold (the caller takes the general path, which names it).
nb::object decode_through_table(const tokenmill::DecodeTable& table, nb::handle ids_seq,
                                bool skip_special, bool special_ends_runs,
                                bool first_while_empty, int runs, bool text) {
  if (runs < 0 || runs > 2) throw nb::value_error("runs must be 0, 1 or 2");
  std::vector<uint32_t> ids;
  if (!read_ids(ids_seq, ids)) {
    throw nb::type_error("ids must be a sequence of ints in [0, 2**32)");
  }
  std::string out;
  std::size_t done = 0;
  {
    std::optional<nb::gil_scoped_release> release;
    if (ids.size() > kDecodeReleaseGilAbove) release.emplace();
    out.reserve(ids.size() * 4);
    done = table.decode(ids.data(), ids.size(), skip_special, special_ends_runs,
                        first_while_empty, static_cast<tokenmill::ByteRuns>(runs), out);
  }
  if (done != ids.size()) return nb::none();
  return decoded_object(out, text);
}

// values -> array('I') (4-byte unsigned on every platform CPython supports), one copy.
nb::object uint32_array(const std::vector<uint32_t>& values) {
  static_assert(sizeof(unsigned int) == 4, "array('I') items must be 4 bytes");
  static PyObject* array_type = [] {
    nb::object cls = nb::module_::import_("array").attr("array");
    return cls.release().ptr();  // kept for the life of the process
  }();
  nb::bytes raw(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  PyObject* out = PyObject_CallFunction(array_type, "sO", "I", raw.ptr());
  if (out == nullptr) throw nb::python_error();
  return nb::steal(out);
}

// bytes spelled in GPT-2's byte alphabet, as a new str built in place: one character per byte,
// all below U+0100 except the 68 remapped ones (U+0100..U+0143).
PyObject* byte_symbols_str(std::string_view bytes) {
  Py_UCS4 widest = 0;
  for (char c : bytes) {
    widest = std::max<Py_UCS4>(widest, tokenmill::byte_symbol(static_cast<unsigned char>(c)));
  }
  const auto n = static_cast<Py_ssize_t>(bytes.size());
  PyObject* out = PyUnicode_New(n, widest);
  if (out == nullptr) return nullptr;
  const int kind = PyUnicode_KIND(out);
  void* data = PyUnicode_DATA(out);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    PyUnicode_WRITE(kind, data, i, tokenmill::byte_symbol(b));
  }
  return out;
}

// A dict sized for n entries up front where CPython offers it (its private call, still there
// in 3.11 and 3.12), else an empty one that grows.
PyObject* new_dict(std::size_t n) {
#if PY_VERSION_HEX < 0x030D0000
  return _PyDict_NewPresized(static_cast<Py_ssize_t>(n));
#else
  (void)n;
  return PyDict_New();
#endif
}

std::vector<Merge> to_merges(const std::vector<uint32_t>& flat) {
  if (flat.size() % 3 != 0) throw tokenmill::Error("merges must be (left, right, result) triples");
  std::vector<Merge> merges;
  merges.reserve(flat.size() / 3);
  for (std::size_t i = 0; i < flat.size(); i += 3) merges.push_back({flat[i], flat[i + 1], flat[i + 2]});
  return merges;
}

// Encodes a batch of words; returns one flat list [id, word index, start, end] per token, so the
// caller slices ids and spans with a stride instead of building an object per token.
std::vector<uint32_t> encode_words(const BPEModel& model, const std::vector<std::string>& words) {
  std::vector<uint32_t> flat;
  {
    nb::gil_scoped_release release;
    std::vector<tokenmill::TokenSpan> spans;
    flat.reserve(words.size() * 8);
    for (std::size_t w = 0; w < words.size(); ++w) {
      spans.clear();
      model.encode_word(words[w], spans);
      for (const auto& s : spans) {
        flat.push_back(s.id);
        flat.push_back(static_cast<uint32_t>(w));
        flat.push_back(s.start);
        flat.push_back(s.end);
      }
    }
  }
  return flat;
}

// encode_words with BPE-dropout; the generator is seeded once and runs through the words.
std::vector<uint32_t> encode_words_dropout(const BPEModel& model,
                                           const std::vector<std::string>& words, double dropout,
                                           uint64_t seed) {
  if (!(dropout >= 0.0 && dropout <= 1.0)) throw tokenmill::Error("dropout must be in [0, 1]");
  std::vector<uint32_t> flat;
  {
    nb::gil_scoped_release release;
    std::vector<tokenmill::TokenSpan> spans;
    uint64_t rng = seed;
    for (std::size_t w = 0; w < words.size(); ++w) {
      spans.clear();
      model.encode_word_dropout(words[w], dropout, rng, spans);
      for (const auto& s : spans) {
        flat.insert(flat.end(), {s.id, static_cast<uint32_t>(w), s.start, s.end});
      }
    }
  }
  return flat;
}

tokenmill::SplitPattern split_pattern(int pattern) {
  if (pattern < 0 || pattern > 3) throw tokenmill::Error("unknown split pattern id");
  return static_cast<tokenmill::SplitPattern>(pattern);
}

// A str as the core reads it: its own code units, converted to UTF-8 by the thread that encodes
// it (an ASCII str's are UTF-8 already). TypeError for anything else.
tokenmill::TextRef text_ref(PyObject* text) {
  if (!PyUnicode_Check(text)) throw nb::type_error("text must be a str");
#if PY_VERSION_HEX < 0x030C0000
  if (PyUnicode_READY(text) != 0) throw nb::python_error();
#endif
  const auto length = static_cast<std::size_t>(PyUnicode_GET_LENGTH(text));
  const unsigned width = PyUnicode_IS_ASCII(text) ? 0u : static_cast<unsigned>(PyUnicode_KIND(text));
  return {PyUnicode_DATA(text), length, width};
}

// Character offsets where each piece of text ends, split by one of the GPT-family patterns, as
// an array('I'): the scanner reads the str's own code points (no UTF-8 copy, and its offsets
// are already characters), and the result is one buffer rather than an int object per piece.
// Given UTF-8 bytes instead, byte offsets, found by the scanners encoding reads text with.
nb::object pretokenize(int pattern, nb::handle text) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  if (PyBytes_Check(text.ptr())) {
    const std::string_view bytes(PyBytes_AS_STRING(text.ptr()),
                                 static_cast<std::size_t>(PyBytes_GET_SIZE(text.ptr())));
    if (bytes.size() >= (std::size_t{1} << 32)) throw tokenmill::Error("text is 4 GiB or longer");
    std::vector<uint32_t> ends;
    tokenmill::pretokenize(p, bytes, ends);
    return uint32_array(ends);
  }
  if (!PyUnicode_Check(text.ptr())) throw nb::type_error("text must be a str or UTF-8 bytes");
  const tokenmill::TextRef units = text_ref(text.ptr());
  const std::size_t length = units.length;
  if (static_cast<uint64_t>(length) >= (uint64_t{1} << 32)) {
    throw tokenmill::Error("text is 4 Gi characters or longer");
  }
  const int width = units.width == 0 ? 1 : static_cast<int>(units.width);  // ASCII: 1 a character
  std::vector<uint32_t> ends;
  auto scan = [&] {
    ends.reserve(length / 4 + 1);
    tokenmill::pretokenize_units(p, units.data, length, width, ends);
  };
  if (length > kReleaseGilAbove) {  // the str is immutable and we hold it: safe to read
    nb::gil_scoped_release release;
    scan();
  } else {
    scan();
  }
  return uint32_array(ends);
}

// A batch of str, each kept alive while the GIL is released (whatever happens to the caller's
// list meanwhile), and the core's view of each. A tuple is kept as it is (it cannot change,
// and the caller holds it for the call); a list's items each get a reference of ours, given
// back when the batch is done; anything else is made a tuple. (A list made a tuple, as every
// batch was, cost a pass over every str's header to take the references, another to read
// them and a third to give them back, each a miss a text in a pass over 20,000 paragraphs:
// a list's are taken and read in one pass here, and both passes ask for the headers ahead.)
// Built and destroyed with the GIL held.
class Texts {
 public:
  Texts() = default;
  Texts(Texts&&) noexcept = default;  // (the vectors moved from are left empty)
  Texts(const Texts&) = delete;
  Texts& operator=(const Texts&) = delete;
  Texts& operator=(Texts&&) = delete;
  ~Texts() {
    for (std::size_t i = 0; i < owned.size(); ++i) {
      if (i + kHeadersAhead < owned.size()) __builtin_prefetch(owned[i + kHeadersAhead], 1);
      Py_DECREF(owned[i]);
    }
  }

  static constexpr std::size_t kHeadersAhead = 8;
  nb::object held;              // the tuple, if the batch is one
  std::vector<PyObject*> owned;  // the list's items, a reference each
  std::vector<tokenmill::TextRef> refs;
};

Texts texts_of(nb::handle texts) {
  Texts out;
  PyObject* const batch = texts.ptr();
  PyObject** items = nullptr;
  std::size_t n = 0;
  bool take = false;  // a reference of ours to each text (a list's)
#if !defined(Py_GIL_DISABLED)  // (a free-threaded build's list may change under us: a tuple)
  if (PyList_CheckExact(batch)) {
    // (Nothing below runs Python code, so the list stays as it is while it is read.)
    items = reinterpret_cast<PyListObject*>(batch)->ob_item;
    n = static_cast<std::size_t>(PyList_GET_SIZE(batch));
    take = true;
    out.owned.reserve(n);
  }
#endif
  if (!take) {
    out.held = PyTuple_Check(batch) ? nb::borrow(batch) : nb::steal(PySequence_Tuple(batch));
    if (!out.held.is_valid()) throw nb::python_error();
    items = reinterpret_cast<PyTupleObject*>(out.held.ptr())->ob_item;
    n = static_cast<std::size_t>(PyTuple_GET_SIZE(out.held.ptr()));
  }
  out.refs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + Texts::kHeadersAhead < n) __builtin_prefetch(items[i + Texts::kHeadersAhead]);
    out.refs.push_back(text_ref(items[i]));
    if (take) {
      Py_INCREF(items[i]);
      out.owned.push_back(items[i]);
    }
  }
  return out;
}

// The id lists of a block's texts, put in `out` (a list of the batch's length) at the texts'
// places; with the GIL held, the cyclic collector paused meanwhile.
void put_id_lists(nb::handle out, const tokenmill::BlockIds& block) {
  const CollectorPaused paused;
  for (std::size_t k = 0; k + 1 < block.offsets.size(); ++k) {
    const std::size_t a = block.offsets[k];
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(block.first + k),
                    id_list(block.ids.data() + a, block.offsets[k + 1] - a).release().ptr());
  }
}

// Texts encoded on `threads` threads: one id list per text.
nb::list encode_ids_batch(const BPEModel& model, int pattern, nb::handle text_list,
                          std::size_t threads) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const Texts batch = texts_of(text_list);
  const std::vector<tokenmill::TextRef>& texts = batch.refs;
  nb::object out = nb::steal(PyList_New(static_cast<Py_ssize_t>(texts.size())));
  if (!out.is_valid()) throw nb::python_error();
  if (std::min(threads, texts.size()) <= 1) {
    // One thread: a range of texts at a time into one buffer (no vector per text), then their
    // lists. Reusing the buffer, rather than one for the whole batch, touches its pages once
    // (the batch's fresh pages, zeroed by the kernel, were a tenth of a first pass over English)
    // and leaves the ids in the cache for the lists.
    tokenmill::BlockIds range;
    for (std::size_t first = 0; first < texts.size();) {
      std::size_t last = first;
      std::size_t units = 0;
      while (last < texts.size() && units < kListRangeUnits) {
        units += texts[last].length * std::max(1u, texts[last].width);
        ++last;
      }
      if (units > kReleaseGilAbove) {
        nb::gil_scoped_release release;
        tokenmill::encode_text_range(model, p, texts, first, last, range);
      } else {
        tokenmill::encode_text_range(model, p, texts, first, last, range);
      }
      put_id_lists(out, range);  // (the GIL held again: the collector paused only then)
      first = last;
    }
    return nb::borrow<nb::list>(out);
  }
  {
    // Each finished block becomes lists with the GIL taken back for it, while the workers
    // encode the rest: building the lists overlaps the encoding instead of following it.
    nb::gil_scoped_release release;
    tokenmill::encode_text_blocks(model, p, texts, threads, [&](const tokenmill::BlockIds& b) {
      nb::gil_scoped_acquire acquire;
      put_id_lists(out, b);
    });
  }
  return nb::borrow<nb::list>(out);
}

// A buffer (a std::vector, or a tokenmill::RawArray) handed to numpy without a copy: the array
// owns it through a capsule.
template <typename Buffer, typename T = std::remove_cv_t<
                               std::remove_pointer_t<decltype(std::declval<Buffer&>().data())>>>
nb::ndarray<nb::numpy, T, nb::ndim<1>> owned_array(Buffer&& values) {
  auto* kept = new Buffer(std::move(values));
  nb::capsule owner(kept, [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(kept->data(), {kept->size()}, owner);
}

// All the texts' ids in one numpy array of uint16 (narrow: every id of the vocabulary fits) or
// uint32, and where each text's ids start (n + 1 int64 offsets): no Python object per token.
nb::tuple encode_ids_flat(const BPEModel& model, int pattern, nb::handle text_list,
                          std::size_t threads, bool narrow, std::optional<uint32_t> separator) {
  if (separator && narrow && *separator > 0xFFFF) {
    throw nb::value_error("the separator id does not fit in uint16");
  }
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const Texts batch = texts_of(text_list);
  const std::vector<tokenmill::TextRef>& texts = batch.refs;
  tokenmill::FlatIds flat;
  {
    nb::gil_scoped_release release;
    flat = tokenmill::encode_texts_flat(
        model, p, texts, threads,
        narrow ? tokenmill::FlatOut::kNarrowIds : tokenmill::FlatOut::kIds,
        separator ? &*separator : nullptr);
  }
  std::vector<int64_t> offsets(flat.offsets.begin(), flat.offsets.end());
  nb::object ids = narrow                  ? nb::cast(owned_array(std::move(flat.narrow)))
                   : flat.joined.size() > 0 ? nb::cast(owned_array(std::move(flat.joined)))
                                            : nb::cast(owned_array(std::move(flat.ids)));
  return nb::make_tuple(ids, owned_array(std::move(offsets)));
}

// How many tokens each text has, without keeping the ids.
std::vector<uint64_t> count_tokens(const BPEModel& model, int pattern, nb::handle text_list,
                                   std::size_t threads) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const Texts batch = texts_of(text_list);
  const std::vector<tokenmill::TextRef>& texts = batch.refs;
  std::vector<uint64_t> counts(texts.size());
  {
    nb::gil_scoped_release release;
    const tokenmill::FlatIds flat =
        tokenmill::encode_texts_flat(model, p, texts, threads, tokenmill::FlatOut::kCounts);
    for (std::size_t t = 0; t < texts.size(); ++t) {
      counts[t] = flat.offsets[t + 1] - flat.offsets[t];
    }
  }
  return counts;
}

nb::object encode_ids(const BPEModel& model, int pattern, nb::handle text) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const tokenmill::TextRef ref = text_ref(text.ptr());
  tokenmill::Encoded e;
  {
    nb::gil_scoped_release release;
    tokenmill::encode_text(model, p, tokenmill::utf8_of(ref), false, e);
    tokenmill::release_utf8_scratch();
  }
  return id_list(e.ids);
}

// Offsets below this are kept ints (those of texts up to 262,144 characters: 8 MiB of ints at
// most).
constexpr uint32_t kKeptOffsets = 1u << 18;

// (ids, starts, ends) of one text as three lists, built with the GIL held.
nb::object offset_lists(const tokenmill::Encoded& e) {
  nb::object ids = id_list(e.ids);
  nb::object starts = id_list(e.starts.data(), e.starts.size(), kKeptOffsets);
  nb::object ends = id_list(e.ends.data(), e.ends.size(), kKeptOffsets);
  PyObject* row = PyTuple_Pack(3, ids.ptr(), starts.ptr(), ends.ptr());
  if (row == nullptr) throw nb::python_error();
  PyObject_GC_UnTrack(row);  // (three lists of ints: no cycle)
  return nb::steal(row);
}

// Each text's (ids, starts, ends), or its ids alone, each text's vectors freed once it is made.
nb::list offset_tuples(std::vector<tokenmill::Encoded>& results, bool ids_only = false) {
  nb::object out = nb::steal(PyList_New(static_cast<Py_ssize_t>(results.size())));
  if (!out.is_valid()) throw nb::python_error();
  const CollectorPaused paused;
  for (std::size_t t = 0; t < results.size(); ++t) {
    tokenmill::Encoded& e = results[t];
    nb::object item = ids_only ? id_list(e.ids) : offset_lists(e);
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(t), item.release().ptr());
    e = tokenmill::Encoded();
  }
  return nb::borrow<nb::list>(out);
}

// A text the SentencePiece pipelines take: fewer than 2^31 characters (their offsets are 32
// bits, and a prefix or spelled space may be added).
void check_spaced_length(const tokenmill::TextRef& ref) {
  if (static_cast<uint64_t>(ref.length) >= (uint64_t{1} << 31)) {
    throw tokenmill::Error("text is 2 Gi characters or longer");
  }
}

// ids, and the character offsets [start, end) of each token in text.
nb::object encode_offsets(const BPEModel& model, int pattern, nb::handle text) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const tokenmill::TextRef ref = text_ref(text.ptr());
  tokenmill::Encoded e;
  {
    nb::gil_scoped_release release;
    tokenmill::encode_text(model, p, tokenmill::utf8_of(ref), true, e);
    tokenmill::release_utf8_scratch();
  }
  return offset_lists(e);
}

// The word of each token of text (the place of its piece among the text's pieces, plus base),
// and how many pieces the text has: tokenizers' word ids, for Encoding.word_ids. A token's
// piece is the one its first character is in (a token never spans two pieces).
nb::tuple encode_word_ids(const BPEModel& model, int pattern, nb::handle text, uint32_t base) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const tokenmill::TextRef ref = text_ref(text.ptr());
  if (static_cast<uint64_t>(ref.length) >= (uint64_t{1} << 32)) {
    throw tokenmill::Error("text is 4 Gi characters or longer");
  }
  tokenmill::Encoded e;
  std::vector<uint32_t> ends;
  std::vector<uint32_t> words;
  {
    nb::gil_scoped_release release;
    tokenmill::encode_text(model, p, tokenmill::utf8_of(ref), true, e);
    tokenmill::release_utf8_scratch();
    const int width = ref.width == 0 ? 1 : static_cast<int>(ref.width);
    tokenmill::pretokenize_units(p, ref.data, ref.length, width, ends);
    if (ends.size() > (uint64_t{1} << 32) - 1 - base) throw tokenmill::Error("too many words");
    words.resize(e.starts.size());
    std::size_t piece = 0;
    for (std::size_t t = 0; t < e.starts.size(); ++t) {
      while (piece + 1 < ends.size() && e.starts[t] >= ends[piece]) ++piece;
      words[t] = base + static_cast<uint32_t>(piece);
    }
  }
  return nb::make_tuple(id_list(words), ends.size());
}

// encode_offsets of each text, on up to `threads` threads with the GIL released: a list of
// (ids, starts, ends) tuples.
nb::list encode_offsets_batch(const BPEModel& model, int pattern, nb::handle text_list,
                              std::size_t threads) {
  const tokenmill::SplitPattern p = split_pattern(pattern);
  const Texts batch = texts_of(text_list);
  std::vector<tokenmill::Encoded> results;
  {
    nb::gil_scoped_release release;
    results = tokenmill::encode_texts_with_offsets(model, p, batch.refs, threads);
  }
  return offset_tuples(results);
}

// ids and character offsets of text through a SentencePiece pipeline (sp_encode.h): the
// .model's normalizer, or (None) spaces spelled "▁" with `prefix` (a SpacePrefix) put first.
// With ids_only, the list of ids alone.
template <class Model>
nb::object encode_spaced(const Model& model,
                         const tokenmill::SentencePieceNormalizer* normalizer, int prefix,
                         bool split, nb::handle text, bool ids_only) {
  if (prefix < 0 || prefix > static_cast<int>(tokenmill::SpacePrefix::kUnlessSpaced)) {
    throw tokenmill::Error("unknown prefix");
  }
  const tokenmill::TextRef ref = text_ref(text.ptr());
  check_spaced_length(ref);
  const tokenmill::SpacePlan plan{normalizer, static_cast<tokenmill::SpacePrefix>(prefix), split};
  tokenmill::Encoded e;
  {
    nb::gil_scoped_release release;
    tokenmill::encode_spaced(model, plan, tokenmill::utf8_of(ref), e, !ids_only);
    tokenmill::release_utf8_scratch();
  }
  return ids_only ? id_list(e.ids) : offset_lists(e);
}

// encode_spaced of each text, on `threads` threads: (ids, starts, ends) tuples.
template <class Model>
nb::list encode_spaced_batch(const Model& model,
                             const tokenmill::SentencePieceNormalizer* normalizer,
                             const std::vector<uint8_t>& prefixes, bool split,
                             nb::handle text_list, std::size_t threads, bool ids_only) {
  const Texts batch = texts_of(text_list);
  for (const tokenmill::TextRef& ref : batch.refs) check_spaced_length(ref);
  std::vector<tokenmill::Encoded> results;
  {
    nb::gil_scoped_release release;
    results = tokenmill::encode_spaced_texts(model, normalizer, split, batch.refs, prefixes,
                                             threads, !ids_only);
  }
  return offset_tuples(results, ids_only);
}

// A trainer's progress(merges, vocab size) callback; it takes the GIL to call into Python.
std::function<void(std::size_t, std::size_t)> reporter(const nb::object& progress) {
  if (progress.is_none()) return {};
  return [&progress](std::size_t merges, std::size_t vocab) {
    nb::gil_scoped_acquire acquire;
    progress(merges, vocab);
  };
}

nb::tuple train(const std::vector<std::string_view>& words, const std::vector<uint64_t>& counts,
                uint64_t vocab_size, int64_t num_merges, uint64_t min_frequency,
                const std::vector<std::string>& special_tokens,
                const std::vector<std::string>& initial_alphabet, int64_t limit_alphabet,
                const std::string& continuing_subword_prefix, const std::string& end_of_word_suffix,
                const std::string& end_of_word_marker, int64_t max_token_length, bool first_seen,
                nb::object progress, std::size_t threads) {
  tokenmill::BPETrainerOptions opt;
  opt.vocab_size = vocab_size;
  opt.num_merges = num_merges;
  opt.min_frequency = min_frequency;
  opt.special_tokens = special_tokens;
  opt.initial_alphabet = initial_alphabet;
  opt.limit_alphabet = limit_alphabet;
  opt.continuing_subword_prefix = continuing_subword_prefix;
  opt.end_of_word_suffix = end_of_word_suffix;
  opt.end_of_word_marker = end_of_word_marker;
  opt.max_token_length = max_token_length;
  opt.tie_break = first_seen ? tokenmill::TieBreak::kFirstSeen : tokenmill::TieBreak::kLexicographic;
  opt.threads = threads;
  const std::function<void(std::size_t, std::size_t)> report = reporter(progress);
  tokenmill::BPETrainResult result;
  {
    nb::gil_scoped_release release;
    result = tokenmill::train_bpe(words, counts, opt, report);
  }
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t>> merges;
  merges.reserve(result.merges.size());
  for (const auto& m : result.merges) merges.emplace_back(m.left, m.right, m.result, m.count);
  return nb::make_tuple(result.vocab, merges, result.alphabet_size);
}


// ---- WordPiece ---------------------------------------------------------------------------------

// Encodes a batch of words like encode_words above: [id, word index, start, end] per token.
std::vector<uint32_t> wordpiece_encode_words(const tokenmill::WordPieceModel& model,
                                             const std::vector<std::string>& words) {
  std::vector<uint32_t> flat;
  std::size_t failed = 0;
  {
    nb::gil_scoped_release release;
    failed = model.encode_words(words, flat);
  }
  if (failed < words.size()) {
    throw tokenmill::Error("word " + std::to_string(failed) + " ('" + words[failed] +
                           "') has a part that no token of the vocabulary matches, and the "
                           "model has no unk token to stand for it");
  }
  return flat;
}

nb::tuple train_wordpiece(const std::vector<std::string>& words,
                          const std::vector<uint64_t>& counts, uint64_t vocab_size,
                          uint64_t min_frequency, const std::vector<std::string>& special_tokens,
                          const std::vector<std::string>& initial_alphabet,
                          int64_t limit_alphabet, const std::string& continuing_subword_prefix,
                          nb::object progress) {
  tokenmill::WordPieceTrainerOptions opt;
  opt.vocab_size = vocab_size;
  opt.min_frequency = min_frequency;
  opt.special_tokens = special_tokens;
  opt.initial_alphabet = initial_alphabet;
  opt.limit_alphabet = limit_alphabet;
  opt.continuing_subword_prefix = continuing_subword_prefix;
  const std::function<void(std::size_t, std::size_t)> report = reporter(progress);
  tokenmill::WordPieceTrainResult result;
  {
    nb::gil_scoped_release release;
    result = tokenmill::train_wordpiece(words, counts, opt, report);
  }
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t, uint64_t, uint64_t>> merges;
  merges.reserve(result.merges.size());
  for (const auto& m : result.merges) {
    merges.emplace_back(m.left, m.right, m.result, m.pair_count, m.left_count, m.right_count);
  }
  return nb::make_tuple(result.vocab, merges, result.alphabet_size, result.words_dropped);
}


// A batch of texts through BERT's normalizer, pre-tokenizer and WordPiece: per text its ids, or
// (ids, starts, ends) with character offsets.
nb::list bert_encode_batch(const tokenmill::WordPieceModel& model,
                           const tokenmill::BertPipeline& pipeline,
                           const std::vector<std::string>& texts, std::size_t threads,
                           bool with_offsets) {
  std::vector<tokenmill::Encoded> results;
  {
    nb::gil_scoped_release release;
    results = pipeline.encode_texts(model, texts, threads);
  }
  nb::object out = nb::steal(PyList_New(static_cast<Py_ssize_t>(results.size())));
  if (!out.is_valid()) throw nb::python_error();
  const CollectorPaused paused;
  for (std::size_t t = 0; t < results.size(); ++t) {
    tokenmill::Encoded& e = results[t];
    nb::object row = with_offsets ? offset_lists(e) : id_list(e.ids);
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(t), row.release().ptr());
    e = tokenmill::Encoded();  // each text's vectors freed once it is a list
  }
  return nb::borrow<nb::list>(out);
}

// The word of each token BERT's pipeline gives `text`: a token that `begins` marks (one without
// the continuing prefix) starts the next word, the first of them word `base`; and the word after
// the last. Encoding.word_ids of a WordPiece encoding, without a Python step a token.
nb::tuple bert_word_ids(const tokenmill::WordPieceModel& model,
                        const tokenmill::BertPipeline& pipeline, const std::string& text,
                        nb::bytes begins, uint32_t base) {
  const auto* flags = static_cast<const unsigned char*>(begins.data());
  const std::size_t known = begins.size();
  std::vector<uint32_t> words;
  uint32_t word = base;
  {
    nb::gil_scoped_release release;
    std::vector<tokenmill::Encoded> results =
        pipeline.encode_texts(model, std::vector<std::string>{text}, 1);
    const std::vector<uint32_t>& ids = results.front().ids;
    words.resize(ids.size());
    for (std::size_t t = 0; t < ids.size(); ++t) {
      // (an id the table does not know begins a word: the model's ids all have a flag)
      const bool starts = ids[t] >= known || flags[ids[t]] != 0;
      if (starts && t > 0) {
        if (word == UINT32_MAX) throw tokenmill::Error("too many words");
        ++word;
      }
      words[t] = word;
    }
    if (!ids.empty()) {
      if (word == UINT32_MAX) throw tokenmill::Error("too many words");
      ++word;
    }
  }
  return nb::make_tuple(id_list(words), word);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "tokenmill's native core (private: use the tokenmill package)";
  m.attr("UNICODE_TABLES_FROM") = tokenmill::uc::table_source();
  {
    std::size_t count = 0;
    const uint32_t* runs = tokenmill::uc::newer_ranges(count);
    nb::list ranges;
    for (std::size_t i = 0; i < count; ++i) {
      ranges.append(nb::make_tuple(runs[2 * i], runs[2 * i + 1]));
    }
    m.attr("UNICODE_NEWER_RANGES") = nb::tuple(ranges);
  }

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tokenmill::SurrogateError& e) {
      // As CPython's own encoding fails: callers catch UnicodeError and name the text.
      PyErr_SetString(PyExc_UnicodeError, e.what());
    } catch (const tokenmill::Error& e) {
      nb::object cls = nb::module_::import_("tokenmill.errors").attr("InputError");
      PyErr_SetString(cls.ptr(), e.what());
    }
  });

  nb::class_<BPEModel>(m, "BPEModel")
      .def(
          "__init__",
          [](BPEModel* self, const nb::list& token_list, const std::vector<uint32_t>& ids,
             const std::vector<uint32_t>& merges, int64_t unk_id,
             const std::string& continuing_subword_prefix, const std::string& end_of_word_suffix,
             int64_t end_of_word_marker_id, bool byte_fallback, bool fuse_unk, bool ignore_merges,
             std::size_t cache_capacity, bool byte_symbols, const std::string& word_mark) {
            // Tokens are str; with byte_symbols they are spelled in GPT-2's byte alphabet and
            // the core keeps their raw bytes (tokens outside the alphabet cannot be formed from
            // bytes and are left out).
            std::vector<std::string> tokens;
            std::vector<uint32_t> kept_ids;
            tokens.reserve(token_list.size());
            std::string raw;
            for (std::size_t k = 0; k < token_list.size(); ++k) {
              std::string t = nb::cast<std::string>(token_list[k]);
              if (!byte_symbols) {
                tokens.push_back(std::move(t));
              } else if (tokenmill::decode_byte_alphabet(t, raw)) {
                tokens.push_back(raw);
                kept_ids.push_back(ids.at(k));
              }
            }
            BPEOptions opt;
            opt.byte_symbols = byte_symbols;
            opt.unk_id = unk_id;
            opt.continuing_subword_prefix = continuing_subword_prefix;
            opt.end_of_word_suffix = end_of_word_suffix;
            opt.end_of_word_marker_id = end_of_word_marker_id;
            opt.byte_fallback = byte_fallback;
            opt.fuse_unk = fuse_unk;
            opt.ignore_merges = ignore_merges;
            opt.cache_capacity = cache_capacity;
            opt.word_mark = word_mark;
            new (self) BPEModel(tokens, byte_symbols ? kept_ids : ids, to_merges(merges), opt);
            make_kept_ints(ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end()) + 1);
          },
          "tokens"_a, "ids"_a, "merges"_a, "unk_id"_a, "continuing_subword_prefix"_a,
          "end_of_word_suffix"_a, "end_of_word_marker_id"_a, "byte_fallback"_a, "fuse_unk"_a,
          "ignore_merges"_a, "cache_capacity"_a, "byte_symbols"_a = false, "word_mark"_a = "")
      .def("encode_words", &encode_words, "words"_a)
      .def("encode_words_dropout", &encode_words_dropout, "words"_a, "dropout"_a, "seed"_a)
      .def("decode_bytes", &decode_model_bytes,
          "ids"_a, "skip"_a, "stop"_a)
      .def("decode_text", &decode_model_text, "ids"_a, "skip"_a, "stop"_a)
      .def(
          "merge_ids",
          [](const BPEModel& model, const std::vector<uint32_t>& ids) {
            nb::gil_scoped_release release;
            return model.merge_ids(ids);
          },
          "ids"_a)
      .def(
          "long_entry_ids",
          [](const BPEModel& model) {
            return std::make_pair(model.long_entry_slots_taken(), BPEModel::kLongEntryIds);
          },
          "(ids taken, room): the ring of piece-cache entries of more tokens than an entry "
          "holds; ids taken counts over every wrap (for tests).")
      .def(
          "backtracks",
          [](const BPEModel& model) {
            nb::gil_scoped_release release;  // the first call builds the tables
            return model.backtracks();
          },
          "Whether long pieces are cut by backtracking (the vocabulary allows it).")
      .def(
          "backtrack_ids",
          [](const BPEModel& model, const nb::bytes& piece) -> std::optional<std::vector<uint32_t>> {
            const std::string_view bytes(piece.c_str(), piece.size());
            std::vector<uint32_t> ids;
            bool found = false;
            {
              nb::gil_scoped_release release;
              found = model.encode_backtrack_ids(bytes, ids);
            }
            if (!found) return std::nullopt;
            return ids;
          },
          "piece"_a,
          "The ids of a piece (bytes) cut by backtracking alone, or None where the encoders "
          "would fall back to merging (the vocabulary does not allow it, or the search gave up).");

  m.def("pretokenize", &pretokenize, "pattern"_a, "text"_a);
  m.def("lay_out_single", &lay_out_single, "before"_a, "ids"_a, "starts"_a, "ends"_a,
        "after"_a, "one_word"_a = false,
        "(ids, starts, ends, special-tokens mask) of the lists `before` + the input + `after`, "
        "the special tokens spanning (0, 0), and with one_word the word ids of an input that "
        "is one word; untracked lists.");
  m.def("untrack_lists", &untrack_lists,
        "Takes each list given that holds only ints, floats, strings, None and tuples of those "
        "out of the cyclic collector's sight.");
  m.def("untrack_parts", &untrack_parts,
        "Takes each list of ints, floats, strings and None given, and each tuple, dict or "
        "frozenset whose items (a dict's keys and values) are those, tuples of those or lists "
        "of those, out of the cyclic collector's sight, with those lists.");
  m.def("set_backtrack_bytes", &tokenmill::set_backtrack_bytes, "bytes"_a,
        "Pieces of at least `bytes` bytes are cut by backtracking (byte-level models whose "
        "merges allow it); returns the previous threshold.");
  m.def("set_bucket_symbols", &tokenmill::set_bucket_symbols, "symbols"_a,
        "Words of at least `symbols` symbols (2 at least) are merged by the bucket walk; "
        "returns the previous threshold (for tests).");
  m.def("piece_cache_sets", &tokenmill::piece_cache_sets,
        "The piece cache's sets in use: 65,536, or 262,144 once it has grown (for tests).");
  m.def("piece_cache_skipped_batches", &tokenmill::piece_cache_skipped_batches,
        "Batches of pieces this process merged without the piece cache, their text's batches "
        "before them having nearly all missed there (for tests).");
  m.def(
      "load_ranks",
      [](const nb::bytes& data, std::size_t cache_capacity) {
        // (tokens spelled in the byte alphabet, ranks, merge triples as packed native uint32
        // (a list of 600k ints would be the largest object of the loaded tokenizer),
        // unreachable ranks, and the byte-level model tiktoken's rules describe: whole pieces
        // first, then merges)
        std::vector<std::string> spelled;
        std::vector<uint32_t> ranks;
        std::vector<uint32_t> flat;
        std::vector<uint32_t> unreachable;
        BPEModel* model = nullptr;
        {
          const std::string_view view(data.c_str(), data.size());
          nb::gil_scoped_release release;
          tokenmill::RanksFile file = tokenmill::parse_ranks(view);
          const std::vector<tokenmill::Merge> merges =
              tokenmill::derive_merges(file.rank_of, file.tokens, file.ranks, unreachable);
          flat.reserve(3 * merges.size());
          for (const auto& m : merges) flat.insert(flat.end(), {m.left, m.right, m.result});
          spelled.reserve(file.tokens.size());
          for (const std::string& t : file.tokens) {
            spelled.push_back(tokenmill::spell_byte_alphabet(t));
          }
          if (unreachable.empty()) {
            BPEOptions opt;
            opt.byte_symbols = true;
            opt.ignore_merges = true;
            opt.cache_capacity = cache_capacity;
            model = new BPEModel(std::move(file.rank_of), merges, opt);
          }
          ranks = std::move(file.ranks);
        }
        make_kept_ints(ranks.empty() ? 0 : *std::max_element(ranks.begin(), ranks.end()) + 1);
        nb::object core = model != nullptr ? nb::cast(model, nb::rv_policy::take_ownership)
                                           : nb::none();
        nb::bytes packed(flat.data(), flat.size() * sizeof(uint32_t));
        return nb::make_tuple(spelled, ranks, packed, unreachable, core);
      },
      "data"_a, "cache_capacity"_a);
  m.def(
      "derive_merges",
      [](const std::vector<nb::bytes>& tokens, const std::vector<uint32_t>& ranks) {
        std::vector<std::string> raw;
        raw.reserve(tokens.size());
        for (const nb::bytes& b : tokens) raw.emplace_back(b.c_str(), b.size());
        std::vector<uint32_t> unreachable;
        std::vector<uint32_t> flat;
        {
          nb::gil_scoped_release release;
          for (const auto& m : tokenmill::derive_merges(raw, ranks, unreachable)) {
            flat.insert(flat.end(), {m.left, m.right, m.result});
          }
        }
        return nb::make_tuple(flat, unreachable);
      },
      "tokens"_a, "ranks"_a);
  m.def("encode_ids", &encode_ids, "model"_a, "pattern"_a, "text"_a);
  m.def("encode_offsets", &encode_offsets, "model"_a, "pattern"_a, "text"_a);
  m.def("encode_word_ids", &encode_word_ids, "model"_a, "pattern"_a, "text"_a, "base"_a);
  m.def("encode_offsets_batch", &encode_offsets_batch, "model"_a, "pattern"_a, "texts"_a,
        "threads"_a);
  m.def("encode_spaced", &encode_spaced<BPEModel>, "model"_a, "normalizer"_a.none(),
        "prefix"_a, "split"_a, "text"_a, "ids_only"_a = false);
  m.def("encode_spaced", &encode_spaced<tokenmill::UnigramModel>, "model"_a,
        "normalizer"_a.none(), "prefix"_a, "split"_a, "text"_a, "ids_only"_a = false);
  m.def("encode_spaced_batch", &encode_spaced_batch<BPEModel>, "model"_a,
        "normalizer"_a.none(), "prefixes"_a, "split"_a, "texts"_a, "threads"_a,
        "ids_only"_a = false);
  m.def("encode_spaced_batch", &encode_spaced_batch<tokenmill::UnigramModel>, "model"_a,
        "normalizer"_a.none(), "prefixes"_a, "split"_a, "texts"_a, "threads"_a,
        "ids_only"_a = false);
  m.def("encode_ids_batch", &encode_ids_batch, "model"_a, "pattern"_a, "texts"_a, "threads"_a);
  m.def("encode_ids_flat", &encode_ids_flat, "model"_a, "pattern"_a, "texts"_a, "threads"_a,
        "narrow"_a, "separator"_a = nb::none());
  m.def("count_tokens", &count_tokens, "model"_a, "pattern"_a, "texts"_a, "threads"_a);

  nb::class_<tokenmill::DecodeTable>(m, "DecodeTable")
      .def("__init__", &make_decode_table, "text"_a, "ends"_a, "byte_values"_a, "special"_a)
      .def("decode", &decode_through_table, "ids"_a, "skip_special"_a, "special_ends_runs"_a,
           "first_while_empty"_a, "runs"_a, "text"_a)
      .def("__len__", &tokenmill::DecodeTable::size);

  nb::class_<tokenmill::PieceCounter>(m, "PieceCounter")
      .def(
          "__init__",
          [](tokenmill::PieceCounter* self, int pattern, std::size_t threads) {
            if (pattern < 0 || pattern > 3) throw tokenmill::Error("unknown split pattern id");
            new (self) tokenmill::PieceCounter(static_cast<tokenmill::SplitPattern>(pattern),
                                               threads);
          },
          "pattern"_a, "threads"_a)
      .def(
          "add",
          [](tokenmill::PieceCounter& self, const std::vector<std::string_view>& texts) {
            nb::gil_scoped_release release;
            self.add(texts);
          },
          "texts"_a)
      .def(
          "counts",
          [](tokenmill::PieceCounter& self, bool byte_level) {
            // {piece: count} in first-seen order, each piece a str: its text, or with
            // byte_level its bytes spelled in GPT-2's byte alphabet (what a ByteLevel
            // pre-tokenizer would make of it). Pieces come from Python text, split between
            // characters, so they are valid UTF-8.
            std::vector<std::pair<std::string_view, uint64_t>> items;
            {
              nb::gil_scoped_release release;
              items = self.items();
            }
            // Sized for every piece up front (growing a dict of millions rehashes each time).
            nb::object out = nb::steal(new_dict(items.size()));
            if (!out.is_valid()) throw nb::python_error();
            for (const auto& [piece, count] : items) {
              PyObject* key = byte_level ? byte_symbols_str(piece)
                                         : PyUnicode_DecodeUTF8(
                                               piece.data(), static_cast<Py_ssize_t>(piece.size()),
                                               "strict");
              nb::object k = nb::steal(key);
              nb::object value = nb::steal(PyLong_FromUnsignedLongLong(count));
              if (!k.is_valid() || !value.is_valid() ||
                  PyDict_SetItem(out.ptr(), k.ptr(), value.ptr()) != 0) {
                throw nb::python_error();
              }
            }
            return out;
          },
          "byte_level"_a);

  m.def("train_bpe", &train, "words"_a, "counts"_a, "vocab_size"_a, "num_merges"_a,
        "min_frequency"_a, "special_tokens"_a, "initial_alphabet"_a, "limit_alphabet"_a,
        "continuing_subword_prefix"_a, "end_of_word_suffix"_a, "end_of_word_marker"_a,
        "max_token_length"_a, "first_seen"_a, "progress"_a.none(), "threads"_a = 1);

  // ---- WordPiece (models/wordpiece.py, trainers/wordpiece.py) ------------------------------------
  nb::class_<tokenmill::WordPieceModel>(m, "WordPieceModel")
      .def(
          "__init__",
          [](tokenmill::WordPieceModel* self, const std::vector<std::string>& tokens,
             const std::vector<uint32_t>& ids, int64_t unk_id,
             const std::string& continuing_subword_prefix, std::size_t max_input_chars_per_word) {
            tokenmill::WordPieceOptions opt;
            opt.unk_id = unk_id;
            opt.continuing_subword_prefix = continuing_subword_prefix;
            opt.max_input_chars_per_word = max_input_chars_per_word;
            new (self) tokenmill::WordPieceModel(tokens, ids, opt);
          },
          "tokens"_a, "ids"_a, "unk_id"_a, "continuing_subword_prefix"_a,
          "max_input_chars_per_word"_a)
      .def("encode_words", &wordpiece_encode_words, "words"_a);
  m.def("train_wordpiece", &train_wordpiece, "words"_a, "counts"_a, "vocab_size"_a,
        "min_frequency"_a, "special_tokens"_a, "initial_alphabet"_a, "limit_alphabet"_a,
        "continuing_subword_prefix"_a, "progress"_a.none());
  nb::class_<tokenmill::BertPipeline>(m, "BertPipeline")
      .def(nb::init<const std::vector<std::pair<uint32_t, std::string>>&,
                    const std::vector<std::pair<uint32_t, uint32_t>>&,
                    const std::vector<uint32_t>&, const std::vector<uint32_t>&>(),
           "changed"_a, "cjk"_a, "punctuation"_a, "spaces"_a);
  m.def("lay_out_pieces", &lay_out_pieces, "pieces"_a, "types"_a);
  m.def("bert_word_ids", &bert_word_ids, "model"_a, "pipeline"_a, "text"_a, "begins"_a,
        "base"_a);
  m.def("bert_encode_batch", &bert_encode_batch, "model"_a, "pipeline"_a, "texts"_a,
        "threads"_a, "with_offsets"_a);
  // ---- end WordPiece -----------------------------------------------------------------------------
  // ---- Unigram LM and SentencePiece (issue 5) -----------------------------------------------
  using tokenmill::UnigramModel;
  // [id, word index, start, end] per token of each word, as BPEModel.encode_words.
  auto flatten = [](const std::vector<std::string>& words, auto&& encode) {
    std::vector<uint32_t> flat;
    std::vector<tokenmill::TokenSpan> spans;
    for (std::size_t w = 0; w < words.size(); ++w) {
      spans.clear();
      encode(words[w], spans);
      for (const auto& s : spans) flat.insert(flat.end(), {s.id, static_cast<uint32_t>(w), s.start, s.end});
    }
    return flat;
  };
  nb::class_<UnigramModel>(m, "UnigramModel")
      .def(
          "__init__",
          [](UnigramModel* self, const std::vector<std::string>& pieces,
             const std::vector<double>& scores, const nb::bytes& kinds, int64_t unk_id,
             bool byte_fallback, bool float32_sums) {
            tokenmill::UnigramOptions opt;
            opt.unk_id = unk_id;
            opt.byte_fallback = byte_fallback;
            opt.float32_sums = float32_sums;
            const auto* k = reinterpret_cast<const uint8_t*>(kinds.c_str());
            new (self) UnigramModel(pieces, scores, std::vector<uint8_t>(k, k + kinds.size()), opt);
          },
          "pieces"_a, "scores"_a, "kinds"_a, "unk_id"_a, "byte_fallback"_a,
          "float32_sums"_a = false)
      .def(
          "encode_words",
          [flatten](const UnigramModel& model, const std::vector<std::string>& words) {
            nb::gil_scoped_release release;
            return flatten(words, [&](const std::string& w, auto& out) { model.encode_word(w, out); });
          },
          "words"_a)
      .def(
          "sample_words",
          [flatten](const UnigramModel& model, const std::vector<std::string>& words, double alpha,
                    int64_t nbest_size, uint64_t seed) {
            nb::gil_scoped_release release;
            uint64_t rng = seed;
            return flatten(words, [&](const std::string& w, auto& out) {
              model.sample(w, alpha, nbest_size, rng, out);
            });
          },
          "words"_a, "alpha"_a, "nbest_size"_a, "seed"_a)
      .def(
          "nbest",
          [](const UnigramModel& model, const std::string& word, std::size_t n) {
            std::vector<tokenmill::Segmentation> list;
            {
              nb::gil_scoped_release release;
              list = model.nbest(word, n);
            }
            std::vector<std::tuple<std::vector<uint32_t>, double>> out;
            for (const auto& s : list) {
              std::vector<uint32_t> flat;
              for (const auto& t : s.tokens) flat.insert(flat.end(), {t.id, 0u, t.start, t.end});
              out.emplace_back(std::move(flat), s.score);
            }
            return out;
          },
          "word"_a, "n"_a);
  m.def(
      "unigram_seed",
      [](const std::vector<std::string>& words, const std::vector<uint64_t>& counts,
         std::size_t max_chars, std::size_t seed_size, const std::vector<uint32_t>& chars,
         const std::vector<uint32_t>& classes) {
        std::vector<std::string> pieces;
        std::vector<double> freqs;
        {
          nb::gil_scoped_release release;
          std::unordered_map<uint32_t, uint32_t> scripts;
          for (std::size_t i = 0; i < chars.size() && i < classes.size(); ++i) scripts[chars[i]] = classes[i];
          tokenmill::seed_pieces(words, counts, max_chars, seed_size, scripts, pieces, freqs);
        }
        return nb::make_tuple(pieces, freqs);
      },
      "words"_a, "counts"_a, "max_chars"_a, "seed_size"_a, "chars"_a, "classes"_a);
  m.def(
      "unigram_e_step",
      [](const UnigramModel& model, const std::vector<std::string>& words,
         const std::vector<uint64_t>& counts, std::size_t threads) {
        std::vector<double> expected;
        double log_z;
        {
          nb::gil_scoped_release release;
          log_z = tokenmill::e_step(model, words, counts, threads, expected);
        }
        return nb::make_tuple(expected, log_z);
      },
      "model"_a, "words"_a, "counts"_a, "threads"_a);
  m.def(
      "unigram_prune_losses",
      [](const UnigramModel& model, const std::vector<std::string>& words,
         const std::vector<uint64_t>& counts, std::size_t threads) {
        nb::gil_scoped_release release;
        return tokenmill::prune_losses(model, words, counts, threads);
      },
      "model"_a, "words"_a, "counts"_a, "threads"_a);
  m.def(
      "unigram_m_step",
      [](const std::vector<double>& expected, const std::vector<uint8_t>& keep, double threshold) {
        nb::gil_scoped_release release;
        return tokenmill::m_step(expected, keep, threshold);
      },
      "expected"_a, "keep"_a, "threshold"_a);
  nb::class_<tokenmill::SentencePieceNormalizer>(m, "SentencePieceNormalizer")
      .def(
          "__init__",
          [](tokenmill::SentencePieceNormalizer* self, const nb::bytes& charsmap,
             const std::vector<std::string>& user_defined, bool add_dummy_prefix,
             bool remove_extra_whitespaces, bool escape_whitespaces) {
            tokenmill::SentencePieceNormalizerOptions opt;
            opt.add_dummy_prefix = add_dummy_prefix;
            opt.remove_extra_whitespaces = remove_extra_whitespaces;
            opt.escape_whitespaces = escape_whitespaces;
            new (self) tokenmill::SentencePieceNormalizer(
                std::string(charsmap.c_str(), charsmap.size()), user_defined, opt);
          },
          "charsmap"_a, "user_defined"_a, "add_dummy_prefix"_a, "remove_extra_whitespaces"_a,
          "escape_whitespaces"_a)
      .def(
          "normalize",
          [](const tokenmill::SentencePieceNormalizer& self, const std::string& text) {
            std::string out;
            std::vector<uint32_t> starts, ends;
            {
              nb::gil_scoped_release release;
              self.normalize(text, out, starts, ends);
            }
            return nb::make_tuple(out, starts, ends);
          },
          "text"_a)
      .def(
          "normalize_batch",
          [](const tokenmill::SentencePieceNormalizer& self, const std::vector<std::string>& texts) {
            std::vector<std::string> out(texts.size());
            {
              nb::gil_scoped_release release;
              std::vector<uint32_t> starts, ends;
              for (std::size_t i = 0; i < texts.size(); ++i) self.normalize(texts[i], out[i], starts, ends);
            }
            return out;
          },
          "texts"_a);
  // ---- end of Unigram LM and SentencePiece ----------------------------------------------------
}
