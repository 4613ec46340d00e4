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
-- Name: shop; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.shop (
    id integer NOT NULL,
    hash character varying(128) NOT NULL,
    url text,
    fetched text,
    name text,
    price text
);


--
-- Name: shop_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.shop_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: shop_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.shop_id_seq OWNED BY public.shop.id;


--
-- Name: items id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.items ALTER COLUMN id SET DEFAULT nextval('public.items_id_seq'::regclass);


--
-- Name: shop id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shop ALTER COLUMN id SET DEFAULT nextval('public.shop_id_seq'::regclass);


--
-- Data for Name: items; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.items VALUES (1, 'eb1a172a1896175bf695848985d943b4418bdb7c99ae99c22dcdf63d', 'news', 'news-6', 'http://example.org/news/6', 'Entry 6', '', '', 'Body of entry 6', '', '2026-12-04T15:47:50Z');
INSERT INTO public.items VALUES (2, '67a0435934114219330df6040469f8561ef96da091a2c400fcc4ee0d', 'news', 'news-5', 'http://example.org/news/5', 'Entry 5', 'ed@example.org', '2026-03-01T17:00:00Z', 'Body of entry 5', '', '2026-12-04T15:47:50Z');
INSERT INTO public.items VALUES (3, 'e775acdf3cd82a60b4e16d3193f5b8f1eaba714762608fe73b1f9da1', 'news', 'news-4', 'http://example.org/news/4', 'Entry 4', '', '2026-03-01T16:00:00Z', 'Body of entry 4', '', '2026-12-04T15:47:50Z');
INSERT INTO public.items VALUES (4, 'd52492a3cc87094e574ebe159f9976b15d4620ce779314399f43ded1', 'news', 'news-3', 'http://example.org/news/3', 'Entry 3', 'ed@example.org', '', 'Body of entry 3', '', '2026-12-04T15:47:50Z');
INSERT INTO public.items VALUES (5, 'dbf8975dc205fc07d96efb5b74556b8fec5a063a6ee1d5ec82a155e4', 'news', 'news-2', 'http://example.org/news/2', 'Entry 2', '', '2026-03-01T14:00:00Z', 'Body of entry 2', '', '2026-12-04T15:47:50Z');
INSERT INTO public.items VALUES (6, '6fe3312d0530ed3dbb3f71d8dd3b135556cd3248b1d84079167a0f40', 'news', 'news-1', 'http://example.org/news/1', 'Entry 1', 'ed@example.org', '2026-03-01T13:00:00Z', 'Body of entry 1', '', '2026-12-04T15:47:50Z');


--
-- Data for Name: shop; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.shop VALUES (1, 'c5c91e7cc0ed8f6e5959f954e4a651bcc471e20af4ad48e41471b6e6', 'http://127.0.0.1:35969/item/1', '2026-12-04T15:47:50Z', 'Item 1', '1.99');
INSERT INTO public.shop VALUES (2, '315f38f10d63b3dd7052888f25f2ace4af19943a5a46aa90af4ca87d', 'http://127.0.0.1:35969/item/2', '2026-12-04T15:47:50Z', 'Item 2', '2.99');
INSERT INTO public.shop VALUES (3, '78a2b780c774a093ebd96c5898b4c2f92a61fd31e8fc60e768d98232', 'http://127.0.0.1:35969/item/3', '2026-12-04T15:47:50Z', 'Item 3', '');
INSERT INTO public.shop VALUES (4, '84a3c6cbc773d5599484b4935c46cf009cfbfa6fdf09e53d2f74d916', 'http://127.0.0.1:35969/item/4', '2026-12-04T15:47:50Z', 'Item 4', '4.99');
INSERT INTO public.shop VALUES (5, '238de3a71fb01b845495309f21dbe1738a5e245f09f3613bc04d9cdb', 'http://127.0.0.1:35969/item/5', '2026-12-04T15:47:50Z', 'Item 5', '5.99');
INSERT INTO public.shop VALUES (6, '19fa55b104adb7980fd8a64756f36565780cd4689f31c5798ef9fef4', 'http://127.0.0.1:35969/item/6', '2026-12-04T15:47:50Z', 'Item 6', '6.99');
INSERT INTO public.shop VALUES (7, '263bb054e5f64d1bde9ca057d24b9a828680547517962102f1d797e9', 'http://127.0.0.1:35969/item/7', '2026-12-04T15:47:50Z', 'Item 7', '7.99');
INSERT INTO public.shop VALUES (8, '59c4fbeb75a8a3f5238a8e22d8b3ed7cd3a0736511063852ace06e61', 'http://127.0.0.1:35969/item/8', '2026-12-04T15:47:50Z', 'Item 8', '8.99');


--
-- Name: items_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.items_id_seq', 6, true);


--
-- Name: shop_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.shop_id_seq', 8, true);


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
-- Name: shop shop_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shop
    ADD CONSTRAINT shop_hash_key UNIQUE (hash);


--
-- Name: shop shop_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shop
    ADD CONSTRAINT shop_pkey PRIMARY KEY (id);


--
-- PostgreSQL database dump complete
--


