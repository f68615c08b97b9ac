"""Updating non-frozen collections in place, as Cassandra applications do.

A non-frozen collection is a set of cells, so `s = s + {x}` adds a cell without reading the rest,
and two clients adding different elements both win. Each operation is checked through CQL text
and, where drivers commonly bind it, through a prepared statement.
"""

import pytest
from cassandra import InvalidRequest


@pytest.fixture
def c(ks):
    ks.session.execute("CREATE TABLE c (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>)")
    ks.session.execute("INSERT INTO c (k, l, s, m) VALUES (1, [1, 2, 3], {'a', 'b'}, {'x': 1, 'y': 2})")
    return ks.session


def get(session, col):
    return session.execute(f"SELECT {col} FROM c WHERE k = 1").one()[0]


def test_list_append_and_prepend(c):
    c.execute("UPDATE c SET l = l + [4, 5] WHERE k = 1")
    c.execute("UPDATE c SET l = [0] + l WHERE k = 1")
    assert get(c, "l") == [0, 1, 2, 3, 4, 5]
    c.execute(c.prepare("UPDATE c SET l = l + ? WHERE k = ?"), ([6], 1))
    c.execute(c.prepare("UPDATE c SET l = ? + l WHERE k = ?"), ([-1], 1))
    assert get(c, "l") == [-1, 0, 1, 2, 3, 4, 5, 6]


def test_list_prepend_keeps_order_of_the_prepended_elements(c):
    c.execute("UPDATE c SET l = [10, 20] + l WHERE k = 1")
    assert get(c, "l") == [10, 20, 1, 2, 3]


def test_list_remove_set_by_index_and_delete_by_index(c):
    c.execute("UPDATE c SET l = l + [2] WHERE k = 1")
    c.execute("UPDATE c SET l = l - [2] WHERE k = 1")  # removes every occurrence
    assert get(c, "l") == [1, 3]
    c.execute("UPDATE c SET l[1] = 30 WHERE k = 1")
    assert get(c, "l") == [1, 30]
    c.execute("DELETE l[0] FROM c WHERE k = 1")
    assert get(c, "l") == [30]


def test_list_index_out_of_range_is_invalid(c):
    with pytest.raises(InvalidRequest, match="(?i)index"):
        c.execute("UPDATE c SET l[10] = 1 WHERE k = 1")


def test_set_add_and_remove(c):
    c.execute("UPDATE c SET s = s + {'c', 'a'} WHERE k = 1")
    assert get(c, "s") == {"a", "b", "c"}
    c.execute("UPDATE c SET s = s - {'a', 'zzz'} WHERE k = 1")
    assert get(c, "s") == {"b", "c"}
    c.execute(c.prepare("UPDATE c SET s = s + ? WHERE k = ?"), ({"d"}, 1))
    c.execute(c.prepare("UPDATE c SET s = s - ? WHERE k = ?"), ({"b"}, 1))
    assert get(c, "s") == {"c", "d"}


def test_removing_every_element_makes_the_collection_null(c):
    c.execute("UPDATE c SET s = s - {'a', 'b'} WHERE k = 1")
    assert get(c, "s") is None


def test_map_put_merge_and_remove(c):
    c.execute("UPDATE c SET m['z'] = 26 WHERE k = 1")
    c.execute("UPDATE c SET m = m + {'x': 10, 'w': 23} WHERE k = 1")
    assert get(c, "m") == {"w": 23, "x": 10, "y": 2, "z": 26}
    c.execute("DELETE m['y'] FROM c WHERE k = 1")
    c.execute("UPDATE c SET m = m - {'w'} WHERE k = 1")
    assert get(c, "m") == {"x": 10, "z": 26}
    c.execute(c.prepare("UPDATE c SET m[?] = ? WHERE k = ?"), ("p", 16, 1))
    c.execute(c.prepare("UPDATE c SET m = m + ? WHERE k = ?"), ({"q": 17}, 1))
    c.execute(c.prepare("DELETE m[?] FROM c WHERE k = ?"), ("x", 1))
    assert get(c, "m") == {"p": 16, "q": 17, "z": 26}


def test_assignment_replaces_the_whole_collection(c):
    c.execute("UPDATE c SET m = {'only': 1}, s = {'only'}, l = [9] WHERE k = 1")
    row = c.execute("SELECT l, s, m FROM c WHERE k = 1").one()
    assert (row.l, row.s, row.m) == ([9], {"only"}, {"only": 1})


def test_additions_from_two_writers_both_survive(c):
    """Two clients adding different elements do not overwrite each other (no read-modify-write
    on the client, and none visible from the server either)."""
    c.execute("UPDATE c SET s = s + {'from writer 1'} WHERE k = 2")
    c.execute("UPDATE c SET s = s + {'from writer 2'} WHERE k = 2")
    assert c.execute("SELECT s FROM c WHERE k = 2").one().s == {"from writer 1", "from writer 2"}


def test_collection_update_on_missing_row_creates_it(c):
    c.execute("UPDATE c SET m['a'] = 1, l = l + [7] WHERE k = 3")
    row = c.execute("SELECT l, s, m FROM c WHERE k = 3").one()
    assert (row.l, row.s, row.m) == ([7], None, {"a": 1})


def test_element_timestamps_decide_between_writes(c):
    """Each element is a cell with its own timestamp: an older write of one key loses."""
    c.execute("UPDATE c USING TIMESTAMP 2000 SET m['t'] = 2 WHERE k = 4")
    c.execute("UPDATE c USING TIMESTAMP 1000 SET m['t'] = 1, m['u'] = 1 WHERE k = 4")
    assert c.execute("SELECT m FROM c WHERE k = 4").one().m == {"t": 2, "u": 1}


def test_frozen_collections_cannot_be_updated_in_part(ks):
    ks.session.execute("CREATE TABLE f (k int PRIMARY KEY, l frozen<list<int>>)")
    ks.session.execute("INSERT INTO f (k, l) VALUES (1, [1])")
    with pytest.raises(InvalidRequest, match="(?i)frozen"):
        ks.session.execute("UPDATE f SET l = l + [2] WHERE k = 1")
    ks.session.execute("UPDATE f SET l = [1, 2] WHERE k = 1")
    assert ks.session.execute("SELECT l FROM f WHERE k = 1").one().l == [1, 2]
