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
    published text,
    summary text,
    content text,
    fetched text
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
-- Name: items id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items ALTER COLUMN id SET DEFAULT nextval('public.items_id_seq'::regclass);


--
-- Data for Name: items; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.items VALUES (1, 'e775acdf3cd82a60b4e16d3193f5b8f1eaba714762608fe73b1f9da1', 'news', 'news-4', 'http://example.org/news/4', 'Entry 4', 'Ed 4', '2026-03-01T16:00:00Z', 'Body of entry 4 .', '', '2026-12-07T13:18:37Z');
INSERT INTO public.items VALUES (2, 'd52492a3cc87094e574ebe159f9976b15d4620ce779314399f43ded1', 'news', 'news-3', 'http://example.org/news/3', 'Entry 3', 'Ed 3', '2026-03-01T15:00:00Z', 'Body of entry 3 .', '', '2026-12-07T13:18:37Z');
INSERT INTO public.items VALUES (3, 'dbf8975dc205fc07d96efb5b74556b8fec5a063a6ee1d5ec82a155e4', 'news', 'news-2', 'http://example.org/news/2', 'Entry 2', 'Ed 2', '2026-03-01T14:00:00Z', 'Body of entry 2 .', '', '2026-12-07T13:18:37Z');
INSERT INTO public.items VALUES (4, '6fe3312d0530ed3dbb3f71d8dd3b135556cd3248b1d84079167a0f40', 'news', 'news-1', 'http://example.org/news/1', 'Entry 1', 'Ed 1', '2026-03-01T13:00:00Z', 'Body of entry 1 .', '', '2026-12-07T13:18:37Z');


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
-- PostgreSQL database dump complete
--


