"""Helpers the tests share: process supervision, test servers, scans."""
