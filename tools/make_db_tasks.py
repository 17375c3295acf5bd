"""Generate the bundled DB suite (agentunit_gym/domains/db/suite/*.yaml) from real data sets.

The tables are small slices of data sets that the ``vega_datasets`` package ships offline
(cars, iris, Burtin's antibiotics, Playfair's wheat prices, Seattle weather, US airports,
Nightingale's Crimean war deaths, Minnesota barley yields, Iowa electricity, driving
trends). The questions and reference SQL below are our own. Gold answers are computed by
running the reference SQL on SQLite here; CI replays every task on SQLite and on MariaDB
and checks that both engines agree.

Run: ``pip install vega_datasets && python tools/make_db_tasks.py`` (rewrites the YAML files).
"""

from __future__ import annotations

import math
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentunit_gym.backends.sql.hashing import register_sqlite_functions, sqlite_table_hash_sql

OUT = Path(__file__).resolve().parent.parent / "agentunit_gym" / "domains" / "db" / "suite"

Q = tuple[str, str, str | list[str]]
"""(type, question, reference SQL: one query, or the statements of a modification)."""


@dataclass
class Dataset:
    key: str
    table: str
    source: str
    columns: list[tuple[str, str]]
    rows: Callable[[], list[list[Any]]]
    tasks: list[Q]


def _cell(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float):
        value = round(value, 6)  # the data sets carry binary artefacts like 1.3900000000000001
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _frame(name: str) -> Any:
    from vega_datasets import data

    return getattr(data, name)()


def cars_rows() -> list[list[Any]]:
    df = _frame("cars").dropna().iloc[::9].head(40)
    return [[r.Name, r.Miles_per_Gallon, r.Cylinders, r.Horsepower, r.Weight_in_lbs, r.Acceleration,
             r.Year.year, r.Origin] for r in df.itertuples()]


def iris_rows() -> list[list[Any]]:
    df = _frame("iris")
    df = df.iloc[list(range(0, 10)) + list(range(50, 60)) + list(range(100, 110))]
    return [[r.sepalLength, r.sepalWidth, r.petalLength, r.petalWidth, r.species] for r in df.itertuples()]


def burtin_rows() -> list[list[Any]]:
    df = _frame("burtin")
    return [[r.Bacteria, r.Penicillin, r.Streptomycin, r.Neomycin, r.Gram_Staining, r.Genus] for r in df.itertuples()]


def wheat_rows() -> list[list[Any]]:
    df = _frame("wheat").dropna()
    return [[r.year, r.wheat, r.wages] for r in df.itertuples()]


def weather_rows() -> list[list[Any]]:
    df = _frame("seattle_weather")
    df = df[(df.date >= "2015-01-01") & (df.date <= "2015-01-31")]
    return [[r.date.strftime("%Y-%m-%d"), r.precipitation, r.temp_max, r.temp_min, r.wind, r.weather]
            for r in df.itertuples()]


def airports_rows() -> list[list[Any]]:
    df = _frame("airports")
    df = df[df.state == "OR"].sort_values("iata").head(45)
    return [[r.iata, r.name, r.city, round(r.latitude, 4), round(r.longitude, 4)] for r in df.itertuples()]


def crimea_rows() -> list[list[Any]]:
    df = _frame("crimea")
    return [[r.date.strftime("%Y-%m"), r.wounds, r.other, r.disease] for r in df.itertuples()]


def barley_rows() -> list[list[Any]]:
    df = _frame("barley")
    df = df[df.year == 1931]
    return [[r.site, r.variety, round(float(r._1), 3)] for r in df.itertuples()]


def iowa_rows() -> list[list[Any]]:
    df = _frame("iowa_electricity")
    return [[r.year.year, r.source, r.net_generation] for r in df.itertuples()]


def driving_rows() -> list[list[Any]]:
    df = _frame("driving")
    return [[r.year, r.side, r.miles, r.gas] for r in df.itertuples()]


DATASETS: list[Dataset] = [
    Dataset("cars", "cars", "vega_datasets cars (1970-1982 automobiles), every 9th complete row",
            [("Name", "TEXT"), ("Miles_per_Gallon", "REAL"), ("Cylinders", "INTEGER"), ("Horsepower", "INTEGER"),
             ("Weight_in_lbs", "INTEGER"), ("Acceleration", "REAL"), ("Year", "INTEGER"), ("Origin", "TEXT")],
            cars_rows, [
                ("counting", "How many cars in the table come from Japan?",
                 "SELECT COUNT(*) FROM cars WHERE Origin = 'Japan'"),
                ("counting", "How many cars have 8 cylinders and were made before 1975?",
                 "SELECT COUNT(*) FROM cars WHERE Cylinders = 8 AND Year < 1975"),
                ("ranking", "Which car has the highest horsepower?",
                 "SELECT Name FROM cars ORDER BY Horsepower DESC LIMIT 1"),
                ("ranking", "Name the three lightest cars, by weight in lbs.",
                 "SELECT Name FROM cars ORDER BY Weight_in_lbs ASC LIMIT 3"),
                ("aggregation-AVG", "What is the average miles per gallon of the European cars, "
                 "rounded to two decimals?",
                 "SELECT ROUND(AVG(Miles_per_Gallon), 2) FROM cars WHERE Origin = 'Europe'"),
                ("aggregation-MAX", "What is the highest miles per gallon of any car made in 1980?",
                 "SELECT MAX(Miles_per_Gallon) FROM cars WHERE Year = 1980"),
                ("comparison", "Which is heavier: the dodge d200 or the plymouth fury iii?",
                 "SELECT Name FROM cars WHERE Name IN ('dodge d200', 'plymouth fury iii') "
                 "ORDER BY Weight_in_lbs DESC LIMIT 1"),
                ("other", "Which cars in the table were made in 1982?",
                 "SELECT Name FROM cars WHERE Year = 1982"),
                ("INSERT", "Add a car to the table: the 'honda civic cvcc', 33.0 miles per gallon, 4 cylinders, "
                 "53 horsepower, 1795 lbs, acceleration 17.4, made in 1977 in Japan.",
                 ["INSERT INTO cars (Name, Miles_per_Gallon, Cylinders, Horsepower, Weight_in_lbs, Acceleration, Year, "
                  "Origin) VALUES ('honda civic cvcc', 33.0, 4, 53, 1795, 17.4, 1977, 'Japan')"]),
                ("UPDATE", "The horsepower of the 'opel manta' was recorded wrongly: set it to 78.",
                 ["UPDATE cars SET Horsepower = 78 WHERE Name = 'opel manta'"]),
                ("DELETE", "Remove every car with fewer than 15 miles per gallon from the table.",
                 ["DELETE FROM cars WHERE Miles_per_Gallon < 15"]),
            ]),
    Dataset("iris", "iris", "vega_datasets iris (Fisher's iris flowers), the first 10 rows of each species",
            [("sepal_length", "REAL"), ("sepal_width", "REAL"), ("petal_length", "REAL"), ("petal_width", "REAL"),
             ("species", "TEXT")],
            iris_rows, [
                ("counting", "How many flowers have a petal length above 5 cm?",
                 "SELECT COUNT(*) FROM iris WHERE petal_length > 5"),
                ("aggregation-AVG", "What is the average sepal width of the setosa flowers, rounded to two decimals?",
                 "SELECT ROUND(AVG(sepal_width), 2) FROM iris WHERE species = 'setosa'"),
                ("aggregation-MIN", "What is the smallest petal width among the virginica flowers?",
                 "SELECT MIN(petal_width) FROM iris WHERE species = 'virginica'"),
                ("aggregation-SUM", "What is the total petal length of the versicolor flowers?",
                 "SELECT ROUND(SUM(petal_length), 2) FROM iris WHERE species = 'versicolor'"),
                ("ranking", "Which species has the largest average sepal length?",
                 "SELECT species FROM iris GROUP BY species ORDER BY AVG(sepal_length) DESC LIMIT 1"),
                ("other", "Which species have at least one flower with a sepal width of 3.0 cm or more "
                 "and a petal length over 4 cm?",
                 "SELECT DISTINCT species FROM iris WHERE sepal_width >= 3.0 AND petal_length > 4"),
                ("UPDATE", "Rename the species 'setosa' to 'Iris setosa' in every row.",
                 ["UPDATE iris SET species = 'Iris setosa' WHERE species = 'setosa'"]),
                ("DELETE", "Delete the versicolor flowers whose petal width is below 1.3 cm.",
                 ["DELETE FROM iris WHERE species = 'versicolor' AND petal_width < 1.3"]),
            ]),
    Dataset("antibiotics", "antibiotics",
            "vega_datasets burtin (Will Burtin's 1951 antibiotic data: minimum inhibitory concentration)",
            [("bacteria", "TEXT"), ("penicillin", "REAL"), ("streptomycin", "REAL"), ("neomycin", "REAL"),
             ("gram_staining", "TEXT"), ("genus", "TEXT")],
            burtin_rows, [
                ("counting", "How many of the bacteria are gram negative?",
                 "SELECT COUNT(*) FROM antibiotics WHERE gram_staining = 'negative'"),
                ("comparison", "Against Escherichia coli, which needs the lower concentration: "
                 "streptomycin or neomycin? Answer with the antibiotic's name.",
                 "SELECT CASE WHEN streptomycin < neomycin THEN 'streptomycin' ELSE 'neomycin' END "
                 "FROM antibiotics WHERE bacteria = 'Escherichia coli'"),
                ("ranking", "Which bacterium needs the highest penicillin concentration?",
                 "SELECT bacteria FROM antibiotics ORDER BY penicillin DESC LIMIT 1"),
                ("aggregation-MIN", "What is the lowest neomycin concentration needed by any Streptococcus?",
                 "SELECT MIN(neomycin) FROM antibiotics WHERE genus = 'Streptococcus'"),
                ("other", "What is the genus of Staphylococcus aureus in this table?",
                 "SELECT genus FROM antibiotics WHERE bacteria = 'Staphylococcus aureus'"),
                ("other", "Which bacteria need less than 0.1 of penicillin?",
                 "SELECT bacteria FROM antibiotics WHERE penicillin < 0.1"),
                ("INSERT", "Add the bacterium 'Shigella dysenteriae' (gram negative, genus other) with penicillin 100, "
                 "streptomycin 0.5 and neomycin 0.2.",
                 ["INSERT INTO antibiotics (bacteria, penicillin, streptomycin, neomycin, gram_staining, genus) "
                  "VALUES ('Shigella dysenteriae', 100, 0.5, 0.2, 'negative', 'other')"]),
            ]),
    Dataset("wheat", "wheat_prices",
            "vega_datasets wheat (William Playfair's wheat prices and weekly wages, 1565-1810)",
            [("year", "INTEGER"), ("wheat", "REAL"), ("wages", "REAL")],
            wheat_rows, [
                ("counting", "In how many recorded years was the price of wheat above 50 shillings?",
                 "SELECT COUNT(*) FROM wheat_prices WHERE wheat > 50"),
                ("aggregation-MAX", "What was the highest weekly wage recorded?",
                 "SELECT MAX(wages) FROM wheat_prices"),
                ("aggregation-AVG", "What was the average wheat price in the years before 1600, "
                 "rounded to two decimals?",
                 "SELECT ROUND(AVG(wheat), 2) FROM wheat_prices WHERE year < 1600"),
                ("ranking", "In which year was the wheat price the highest?",
                 "SELECT year FROM wheat_prices ORDER BY wheat DESC LIMIT 1"),
                ("comparison", "Was the wheat price higher in 1700 or in 1750? Answer with the year.",
                 "SELECT year FROM wheat_prices WHERE year IN (1700, 1750) ORDER BY wheat DESC LIMIT 1"),
                ("UPDATE", "Raise every wage recorded after 1800 by 1 shilling.",
                 ["UPDATE wheat_prices SET wages = wages + 1 WHERE year > 1800"]),
            ]),
    Dataset("weather", "seattle_weather", "vega_datasets seattle-weather, January 2015",
            [("day", "TEXT"), ("precipitation", "REAL"), ("temp_max", "REAL"), ("temp_min", "REAL"),
             ("wind", "REAL"), ("weather", "TEXT")],
            weather_rows, [
                ("counting", "On how many days of January 2015 was the weather recorded as sun?",
                 "SELECT COUNT(*) FROM seattle_weather WHERE weather = 'sun'"),
                ("aggregation-SUM", "What was the total precipitation in January 2015, in millimetres?",
                 "SELECT ROUND(SUM(precipitation), 2) FROM seattle_weather"),
                ("aggregation-MIN", "What was the lowest minimum temperature of the month?",
                 "SELECT MIN(temp_min) FROM seattle_weather"),
                ("aggregation-MAX", "What was the strongest wind recorded on a foggy day?",
                 "SELECT MAX(wind) FROM seattle_weather WHERE weather = 'fog'"),
                ("ranking", "Which day had the most precipitation?",
                 "SELECT day FROM seattle_weather ORDER BY precipitation DESC LIMIT 1"),
                ("comparison", "Was it warmer (higher maximum temperature) on 2015-01-05 or on 2015-01-15? "
                 "Answer with the date.",
                 "SELECT day FROM seattle_weather WHERE day IN ('2015-01-05', '2015-01-15') "
                 "ORDER BY temp_max DESC LIMIT 1"),
                ("other", "On which days did the maximum temperature reach 15 degrees or more?",
                 "SELECT day FROM seattle_weather WHERE temp_max >= 15"),
                ("DELETE", "Delete the sunny days from the table.",
                 ["DELETE FROM seattle_weather WHERE weather = 'sun'"]),
            ]),
    Dataset("airports", "airports", "vega_datasets airports, airports in Oregon (first 45 by code)",
            [("iata", "TEXT"), ("name", "TEXT"), ("city", "TEXT"), ("latitude", "REAL"), ("longitude", "REAL")],
            airports_rows, [
                ("counting", "How many airports in the table are in the city of Portland?",
                 "SELECT COUNT(*) FROM airports WHERE city = 'Portland'"),
                ("counting", "How many airports lie north of latitude 45?",
                 "SELECT COUNT(*) FROM airports WHERE latitude > 45"),
                ("ranking", "What is the code (iata) of the westernmost airport?",
                 "SELECT iata FROM airports ORDER BY longitude ASC LIMIT 1"),
                ("aggregation-MAX", "What is the largest latitude of any airport in the table?",
                 "SELECT MAX(latitude) FROM airports"),
                ("other", "What is the name of the airport with code 'EUG'?",
                 "SELECT name FROM airports WHERE iata = 'EUG'"),
                ("INSERT", "Add an airport: code 'ZZO', name 'Test Field', city 'Salem', latitude 44.9, "
                 "longitude -123.0.",
                 ["INSERT INTO airports (iata, name, city, latitude, longitude) "
                  "VALUES ('ZZO', 'Test Field', 'Salem', 44.9, -123.0)"]),
                ("UPDATE", "The airport with code 'EUG' moved its city to 'Eugene-Springfield': update it.",
                 ["UPDATE airports SET city = 'Eugene-Springfield' WHERE iata = 'EUG'"]),
            ]),
    Dataset("crimea", "crimean_war_deaths",
            "vega_datasets crimea (Florence Nightingale's monthly deaths of the British army, 1854-1856)",
            [("month", "TEXT"), ("wounds", "INTEGER"), ("other", "INTEGER"), ("disease", "INTEGER")],
            crimea_rows, [
                ("counting", "In how many months did disease kill more than 1000 soldiers?",
                 "SELECT COUNT(*) FROM crimean_war_deaths WHERE disease > 1000"),
                ("aggregation-SUM", "How many soldiers died of wounds over the whole period?",
                 "SELECT SUM(wounds) FROM crimean_war_deaths"),
                ("aggregation-AVG", "What was the average monthly number of deaths from other causes, "
                 "rounded to two decimals?",
                 "SELECT ROUND(AVG(other), 2) FROM crimean_war_deaths"),
                ("ranking", "Which month had the most deaths from disease?",
                 "SELECT month FROM crimean_war_deaths ORDER BY disease DESC LIMIT 1"),
                ("comparison", "In 1855-01, were there more deaths from wounds or from other causes? "
                 "Answer 'wounds' or 'other'.",
                 "SELECT CASE WHEN wounds > other THEN 'wounds' ELSE 'other' END "
                 "FROM crimean_war_deaths WHERE month = '1855-01'"),
                ("UPDATE", "Correct the 1854-04 record: 2 soldiers died of wounds that month, not 0.",
                 ["UPDATE crimean_war_deaths SET wounds = 2 WHERE month = '1854-04'"]),
                ("DELETE", "Remove the months of 1856 from the table.",
                 ["DELETE FROM crimean_war_deaths WHERE month LIKE '1856-%'"]),
            ]),
    Dataset("barley", "barley_yields",
            "vega_datasets barley (Immer's Minnesota barley trials), the 1931 harvest",
            [("site", "TEXT"), ("variety", "TEXT"), ("bushels_per_acre", "REAL")],
            barley_rows, [
                ("counting", "How many different varieties were grown in 1931?",
                 "SELECT COUNT(DISTINCT variety) FROM barley_yields"),
                ("aggregation-SUM", "What is the total yield in bushels per acre of all varieties at the "
                 "Waseca site, rounded to two decimals?",
                 "SELECT ROUND(SUM(bushels_per_acre), 2) FROM barley_yields WHERE site = 'Waseca'"),
                ("aggregation-MIN", "What was the lowest yield recorded at Crookston?",
                 "SELECT MIN(bushels_per_acre) FROM barley_yields WHERE site = 'Crookston'"),
                ("ranking", "Which site had the highest average yield?",
                 "SELECT site FROM barley_yields GROUP BY site ORDER BY AVG(bushels_per_acre) DESC LIMIT 1"),
                ("comparison", "At Morris, did Manchuria or Trebi yield more? Answer with the variety.",
                 "SELECT variety FROM barley_yields WHERE site = 'Morris' AND variety IN ('Manchuria', 'Trebi') "
                 "ORDER BY bushels_per_acre DESC LIMIT 1"),
                ("other", "Which varieties yielded more than 50 bushels per acre at some site?",
                 "SELECT DISTINCT variety FROM barley_yields WHERE bushels_per_acre > 50"),
                ("DELETE", "Delete every Duluth record with a yield below 27 bushels per acre.",
                 ["DELETE FROM barley_yields WHERE site = 'Duluth' AND bushels_per_acre < 27"]),
            ]),
    Dataset("iowa", "iowa_electricity",
            "vega_datasets iowa-electricity (net generation by source, 2001-2017)",
            [("year", "INTEGER"), ("source", "TEXT"), ("net_generation", "INTEGER")],
            iowa_rows, [
                ("counting", "In how many years did renewables generate more than 10000 (net generation)?",
                 "SELECT COUNT(*) FROM iowa_electricity WHERE source = 'Renewables' AND net_generation > 10000"),
                ("aggregation-SUM", "What was the total net generation of all sources in 2010?",
                 "SELECT SUM(net_generation) FROM iowa_electricity WHERE year = 2010"),
                ("aggregation-MAX", "What was the highest yearly net generation from nuclear energy?",
                 "SELECT MAX(net_generation) FROM iowa_electricity WHERE source = 'Nuclear Energy'"),
                ("aggregation-MIN", "What was the lowest yearly net generation from fossil fuels?",
                 "SELECT MIN(net_generation) FROM iowa_electricity WHERE source = 'Fossil Fuels'"),
                ("aggregation-AVG", "What was the average yearly net generation from renewables, rounded to "
                 "two decimals?",
                 "SELECT ROUND(AVG(net_generation), 2) FROM iowa_electricity WHERE source = 'Renewables'"),
                ("ranking", "In which year did renewables generate the most?",
                 "SELECT year FROM iowa_electricity WHERE source = 'Renewables' ORDER BY net_generation DESC LIMIT 1"),
                ("comparison", "In 2017, which generated more: fossil fuels or renewables? Answer with the source.",
                 "SELECT source FROM iowa_electricity WHERE year = 2017 AND source IN ('Fossil Fuels', 'Renewables') "
                 "ORDER BY net_generation DESC LIMIT 1"),
                ("INSERT", "Add the 2018 figure for renewables: a net generation of 21000.",
                 ["INSERT INTO iowa_electricity (year, source, net_generation) VALUES (2018, 'Renewables', 21000)"]),
                ("UPDATE", "Rename the source 'Nuclear Energy' to 'Nuclear' in every row.",
                 ["UPDATE iowa_electricity SET source = 'Nuclear' WHERE source = 'Nuclear Energy'"]),
            ]),
    Dataset("driving", "driving",
            "vega_datasets driving (US miles driven per capita and gas prices, 1956-2010)",
            [("year", "INTEGER"), ("side", "TEXT"), ("miles", "INTEGER"), ("gas", "REAL")],
            driving_rows, [
                ("counting", "In how many years was the gas price above 2.5?",
                 "SELECT COUNT(*) FROM driving WHERE gas > 2.5"),
                ("aggregation-AVG", "What was the average gas price in the 1990s (1990 to 1999), "
                 "rounded to two decimals?",
                 "SELECT ROUND(AVG(gas), 2) FROM driving WHERE year BETWEEN 1990 AND 1999"),
                ("aggregation-SUM", "What is the sum of the miles driven per capita over the years 2000 to 2004?",
                 "SELECT SUM(miles) FROM driving WHERE year BETWEEN 2000 AND 2004"),
                ("ranking", "In which year were the most miles driven per capita?",
                 "SELECT year FROM driving ORDER BY miles DESC LIMIT 1"),
                ("other", "In which years was the gas price below 1.6?",
                 "SELECT year FROM driving WHERE gas < 1.6"),
                ("INSERT", "Add the year 2011: side 'right', 9600 miles per capita, gas price 3.4.",
                 ["INSERT INTO driving (year, side, miles, gas) VALUES (2011, 'right', 9600, 3.4)"]),
                ("DELETE", "Delete the rows of the years before 1960.",
                 ["DELETE FROM driving WHERE year < 1960"]),
            ]),
]


FAMILIES: dict[str, str] = {
    "db-airports-02": "gen-db/count-above",
    "db-airports-03": "gen-db/rank-top",
    "db-airports-06": "gen-db/insert-row",
    "db-antibiotics-01": "gen-db/count-text",
    "db-antibiotics-03": "gen-db/rank-top",
    "db-antibiotics-04": "gen-db/min-by-text",
    "db-antibiotics-07": "gen-db/insert-row",
    "db-barley-03": "gen-db/min-by-text",
    "db-cars-01": "gen-db/count-text",
    "db-cars-09": "gen-db/insert-row",
    "db-cars-11": "gen-db/delete-below",
    "db-crimea-01": "gen-db/count-above",
    "db-crimea-04": "gen-db/rank-top",
    "db-driving-01": "gen-db/count-above",
    "db-driving-06": "gen-db/insert-row",
    "db-driving-07": "gen-db/delete-below",
    "db-iowa-03": "gen-db/max-by-text",
    "db-iowa-04": "gen-db/min-by-text",
    "db-iowa-08": "gen-db/insert-row",
    "db-iris-01": "gen-db/count-above",
    "db-iris-03": "gen-db/min-by-text",
    "db-weather-01": "gen-db/count-text",
    "db-weather-04": "gen-db/max-by-text",
    "db-weather-05": "gen-db/rank-top",
    "db-weather-08": "gen-db/delete-text",
    "db-wheat-01": "gen-db/count-above",
}
"""Bundled tasks that are instances of a DB generator family (the same SQL shape over the same
table, literals aside): their ``template``, so their split is the family's (issue 33).
tests/domains/db/test_bundled_families.py finds every such task."""


def _table_hash(conn: sqlite3.Connection, table: str, columns: list[str]) -> str:
    return str(conn.execute(sqlite_table_hash_sql(table, columns)).fetchone()[0])


def _load(ds: Dataset, rows: list[list[str | None]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    register_sqlite_functions(conn.create_function, conn.create_aggregate)
    cols = ", ".join(f'"{n}" {t}' for n, t in ds.columns)
    conn.execute(f'CREATE TABLE "{ds.table}" ({cols})')
    marks = ", ".join("?" for _ in ds.columns)
    conn.executemany(f'INSERT INTO "{ds.table}" VALUES ({marks})', rows)
    return conn


def _gold(value: Any) -> str:
    if isinstance(value, float):
        value = round(value, 6)
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def build(ds: Dataset) -> list[dict[str, Any]]:
    """The task mappings of one data set (gold answers computed on SQLite)."""
    rows = [[_cell(v) for v in row] for row in ds.rows()]
    if not 10 <= len(rows) <= 60:
        raise SystemExit(f"{ds.key}: {len(rows)} rows, expected 10-60")
    names = [n for n, _ in ds.columns]
    table = {"name": ds.table, "columns": [{"name": n, "type": t} for n, t in ds.columns], "rows": rows}
    description = (
        f"The table is named {ds.table}; its columns are "
        + ", ".join(f"{n} ({t.lower()})" for n, t in ds.columns) + "."
    )
    tasks = []
    for index, (task_type, question, sql) in enumerate(ds.tasks, start=1):
        conn = _load(ds, rows)
        task: dict[str, Any] = {"id": f"db-{ds.key}-{index:02d}"}
        if task["id"] in FAMILIES:
            task["template"] = FAMILIES[task["id"]]
        task.update({"type": task_type, "instruction": question, "description": description})
        if isinstance(sql, list):
            before = _table_hash(conn, ds.table, names)
            for statement in sql:
                conn.execute(statement)
            if _table_hash(conn, ds.table, names) == before:
                raise SystemExit(f"{task['id']}: the reference statements do not change the table")
            task["reference_sql"] = sql
        else:
            result = conn.execute(sql).fetchall()
            # Ties would make the answer depend on row order (and so on the engine): the
            # same query over the rows loaded in reverse must give the same values.
            mirror = _load(ds, rows[::-1])
            if sorted(map(repr, mirror.execute(sql).fetchall())) != sorted(map(repr, result)):
                raise SystemExit(f"{task['id']}: the answer depends on row order (a tie): {result!r}")
            mirror.close()
            if not result or any(len(r) != 1 for r in result) or len(result) > 12:
                raise SystemExit(f"{task['id']}: expected 1-12 single-column rows, got {result!r}")
            task["answer"] = [_gold(r[0]) for r in result]
            task["reference_sql"] = [sql]
        task["tables"] = [table]  # one object for every task: YAML writes it once, then aliases
        task["labels"] = [ds.key]
        task["source"] = ds.source
        tasks.append(task)
        conn.close()
    return tasks


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    total = 0
    for ds in DATASETS:
        tasks = build(ds)
        header = (f"# Generated by tools/make_db_tasks.py from {ds.source}.\n"
                  "# Questions and SQL are agentunit-gym's own; do not edit by hand, edit the script.\n")
        text = yaml.safe_dump({"tasks": tasks}, sort_keys=False, allow_unicode=True, width=120)
        (OUT / f"{ds.key}.yaml").write_text(header + text, encoding="utf-8")
        total += len(tasks)
    print(f"wrote {total} tasks to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
