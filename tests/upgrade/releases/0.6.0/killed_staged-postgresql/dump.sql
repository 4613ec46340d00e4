--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: items; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.items (
    id integer NOT NULL,
    hash character varying(128) NOT NULL,
    source text,
    guid text,
    link text,
    title text,
    author text,
    published timestamp with time zone,
    updated timestamp with time zone,
    summary text,
    content text,
    categories jsonb,
    enclosures jsonb,
    image text,
    comments text,
    language text,
    fetched timestamp with time zone,
    changed timestamp with time zone
);


--
-- Name: items_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.items_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: items_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.items_id_seq OWNED BY public.items.id;


--
-- Name: parser_schema; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.parser_schema (
    table_name character varying(128) NOT NULL,
    version integer NOT NULL,
    migrated timestamp with time zone
);


--
-- Name: sources; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sources (
    name text NOT NULL,
    url text,
    address text,
    protocol text,
    title text,
    site text,
    description text,
    language text,
    tags jsonb,
    last_poll timestamp with time zone,
    last_success timestamp with time zone,
    last_new timestamp with time zone,
    last_status integer,
    failures integer,
    dead boolean
);


--
-- Name: items id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items ALTER COLUMN id SET DEFAULT nextval('public.items_id_seq'::regclass);


--
-- Data for Name: items; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.items VALUES (1, 'e775acdf3cd82a60b4e16d3193f5b8f1eaba714762608fe73b1f9da1', 'news', 'news-4', 'http://example.org/news/4', 'Entry 4', 'Ed 4', '2026-03-01 16:00:00+00', '2026-03-01 16:05:00+00', 'Body of entry 4 .', '<p>Body of <b>entry 4</b>.</p>', '["news", "n4"]', '[{"url": "http://example.org/audio/4.mp3", "type": "audio/mpeg", "length": 4000}]', 'http://example.org/img/4.jpg', 'http://example.org/news/4#comments', 'en-gb', '2026-12-07 13:19:02+00', NULL);
INSERT INTO public.items VALUES (2, 'd52492a3cc87094e574ebe159f9976b15d4620ce779314399f43ded1', 'news', 'news-3', 'http://example.org/news/3', 'Entry 3', 'Ed 3', '2026-03-01 15:00:00+00', '2026-03-01 15:05:00+00', 'Body of entry 3 .', '<p>Body of <b>entry 3</b>.</p>', '["news", "n3"]', '[{"url": "http://example.org/audio/3.mp3", "type": "audio/mpeg", "length": 3000}]', 'http://example.org/img/3.jpg', 'http://example.org/news/3#comments', 'en-gb', '2026-12-07 13:19:02+00', NULL);
INSERT INTO public.items VALUES (3, 'dbf8975dc205fc07d96efb5b74556b8fec5a063a6ee1d5ec82a155e4', 'news', 'news-2', 'http://example.org/news/2', 'Entry 2', 'Ed 2', '2026-03-01 14:00:00+00', '2026-03-01 14:05:00+00', 'Body of entry 2 .', '<p>Body of <b>entry 2</b>.</p>', '["news", "n2"]', '[{"url": "http://example.org/audio/2.mp3", "type": "audio/mpeg", "length": 2000}]', 'http://example.org/img/2.jpg', 'http://example.org/news/2#comments', 'en-gb', '2026-12-07 13:19:02+00', NULL);
INSERT INTO public.items VALUES (4, '6fe3312d0530ed3dbb3f71d8dd3b135556cd3248b1d84079167a0f40', 'news', 'news-1', 'http://example.org/news/1', 'Entry 1', 'Ed 1', '2026-03-01 13:00:00+00', '2026-03-01 13:05:00+00', 'Body of entry 1 .', '<p>Body of <b>entry 1</b>.</p>', '["news", "n1"]', '[{"url": "http://example.org/audio/1.mp3", "type": "audio/mpeg", "length": 1000}]', 'http://example.org/img/1.jpg', 'http://example.org/news/1#comments', 'en-gb', '2026-12-07 13:19:02+00', NULL);


--
-- Data for Name: parser_schema; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.parser_schema VALUES ('items', 2, NULL);
INSERT INTO public.parser_schema VALUES ('sources', 2, NULL);


--
-- Data for Name: sources; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sources VALUES ('news', 'http://127.0.0.1:46343/feed.xml', NULL, 'feed', 'News of the day', 'http://example.org/', 'test', 'en-gb', NULL, '2026-12-07 13:19:02+00', '2026-12-07 13:19:02+00', '2026-12-07 13:19:02+00', 200, 0, false);


--
-- Name: items_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.items_id_seq', 4, true);


--
-- Name: items items_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items
    ADD CONSTRAINT items_hash_key UNIQUE (hash);


--
-- Name: items items_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items
    ADD CONSTRAINT items_pkey PRIMARY KEY (id);


--
-- Name: parser_schema parser_schema_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.parser_schema
    ADD CONSTRAINT parser_schema_pkey PRIMARY KEY (table_name);


--
-- Name: sources sources_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sources
    ADD CONSTRAINT sources_pkey PRIMARY KEY (name);


--
-- Name: items_published; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX items_published ON public.items USING btree (published);


--
-- Name: items_source_published; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX items_source_published ON public.items USING btree (source, published);


--
-- PostgreSQL database dump complete
--


